#!/usr/bin/env bash
# Build what tests/gpu/gpu-proof-dashboard.sh carries to a lent GPU machine (it reaches no network; one call carries
# at most 64 MiB, so this travels in parts, one call each: tests/gpu/README.md, "The lent machines"):
#   - headless Chromium and chromedriver from Debian bookworm's packages (bookworm-security's chromium), fetched with
#     `apt-get download` through a source list of their own (this host's apt configuration is untouched) and
#     unpacked here with dpkg -x, never installed: the browser's files, the shared libraries that its ELF files need
#     (tests/gpu/elf_closure.py; glibc excepted: the machine brings its own, newer than bookworm's 2.36), NSS's
#     modules and the Liberation fonts; one tar, xz-compressed, split in 59 MiB parts DEST/p1/part-00, DEST/p2/...
#   - DEST/whl: the wheels for a scheduler, a dask-cuda worker and the dashboard (dask, distributed, dask-cuda, bokeh
#     and what they need, at the pins of images/pins/rapids-26.10-cuda13.txt; numpy 2.4.6 too, as in
#     gpu-proof-etl.sh) and Selenium with its needs (not pinned there: the versions below).
# The sha256 of every part, of the tar and of every wheel go to tests/gpu/results/dashboard-gpu-h100/carry.sha256,
# the package versions to .../debs.txt.
#   tests/gpu/carry-browser.sh [DEST]     # DEST defaults to .browser (ignored through .git/info/exclude)
set -euo pipefail
cd "$(dirname "$0")/../.."
dest="${1:-.browser}"
results=tests/gpu/results/dashboard-gpu-h100
pins=images/pins/rapids-26.10-cuda13.txt
# The packages that hold what Chromium 156 and chromedriver load (found once by resolving chromium and
# chromium-driver without recommends and keeping the owners of elf_closure.py's libraries); elf_closure.py checks
# below that nothing is missing.
debs=(chromium chromium-common chromium-driver fonts-liberation libasound2 libasyncns0 libatk-bridge2.0-0 libatk1.0-0
  libatspi2.0-0 libavahi-client3 libavahi-common3 libblkid1 libbrotli1 libbsd0 libcairo2 libcap2 libcom-err2 libcups2
  libdatrie1 libdav1d6 libdbus-1-3 libdouble-conversion3 libdrm2 libexpat1 libffi8 libflac12 libfontconfig1
  libfreetype6 libfribidi0 libgbm1 libgcc-s1 libgcrypt20 libglib2.0-0 libgmp10 libgnutls30 libgpg-error0
  libgraphite2-3 libgssapi-krb5-2 libharfbuzz-subset0 libharfbuzz0b libhogweed6 libidn2-0 libjpeg62-turbo libk5crypto3
  libkeyutils1 libkrb5-3 libkrb5support0 liblcms2-2 liblz4-1 liblzma5 libmd0 libminizip1 libmount1 libmp3lame0
  libmpg123-0 libnettle8 libnspr4 libnss3 libogg0 libopenh264-7 libopenjp2-7 libopus0 libp11-kit0 libpango-1.0-0
  libpcre2-8-0 libpixman-1-0 libpng16-16 libpulse0 libselinux1 libsndfile1 libstdc++6 libsystemd0 libtasn1-6 libthai0
  libudev1 libunistring2 libvorbis0a libvorbisenc2 libwayland-server0 libx11-6 libx11-xcb1 libxau6 libxcb-render0
  libxcb-shm0 libxcb1 libxcomposite1 libxdamage1 libxdmcp6 libxext6 libxfixes3 libxi6 libxkbcommon0 libxnvctrl0
  libxrandr2 libxrender1 libzstd1 zlib1g)
pinned=(dask distributed dask-cuda rapids-dask-dependency bokeh tornado zict tblib partd locket xyzservices numpy
  cloudpickle toolz msgpack pyyaml packaging nvidia-ml-py narwhals cuda-core cuda-pathfinder click fsspec jinja2
  markupsafe psutil sortedcontainers typing-extensions)
selenium=(selenium==4.51.0 trio==0.35.0 trio-websocket==0.12.2 outcome==1.3.0.post0 sniffio==1.3.1 wsproto==1.3.2
  h11==0.16.0 websocket-client==1.9.2 certifi==2026.10.19.post1 urllib3==2.8.0 pysocks==1.7.1 attrs==26.1.0 idna==3.20)

mkdir -p .git/info
grep -qx "/${dest}/" .git/info/exclude 2>/dev/null || echo "/${dest}/" >>.git/info/exclude
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
rm -rf "$dest"; mkdir -p "$dest/whl" "$results"

# --- wheels --------------------------------------------------------------------------------------------------------
# shellcheck source=tests/gpu/wheels-lib.sh
. tests/gpu/wheels-lib.sh
mapfile -t specs < <(pinned_specs "$pins" "${pinned[@]}")
[ "${#specs[@]}" -eq "${#pinned[@]}" ] || exit 1
download_wheels "$dest/whl" "${specs[@]}" "${selenium[@]}"
count=$(( ${#specs[@]} + ${#selenium[@]} ))

# --- Debian bookworm's Chromium, unpacked -------------------------------------------------------------------------
mkdir -p "$work/lists/partial" "$work/debs"
cat >"$work/sources.list" <<'EOF'
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm main
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian-security bookworm-security main
EOF
apt_opts=(-o "Dir::Etc::SourceList=$work/sources.list" -o Dir::Etc::SourceParts=/dev/null
          -o "Dir::State::Lists=$work/lists" -o APT::Architecture=amd64 -o APT::Architectures=amd64
          -o APT::Sandbox::User=root)
apt-get -qq "${apt_opts[@]}" update
(cd "$work/debs" && apt-get -qq "${apt_opts[@]}" download "${debs[@]}")
for deb in "$work"/debs/*.deb; do
  dpkg-deb -f "$deb" Package Version | paste -sd' '
  dpkg -x "$deb" "$work/root"
done | sort >"$results/debs.txt"
root=$work/root prefix=$work/prefix
mkdir -p "$prefix/chromium/locales" "$prefix/lib" "$prefix/fonts"
(cd "$root/usr/lib/chromium" && cp chromium chrome_crashpad_handler chrome_100_percent.pak resources.pak icudtl.dat \
  snapshot_blob.bin v8_context_snapshot.bin libEGL.so libGLESv2.so libvk_swiftshader.so vk_swiftshader_icd.json \
  libvulkan.so.1 "$prefix/chromium/" && cp locales/en-US.pak "$prefix/chromium/locales/")
cp "$root/usr/bin/chromedriver" "$prefix/chromium/chromedriver"
python3 tests/gpu/elf_closure.py "$root" "$root/usr/lib/chromium/chromium" "$root/usr/bin/chromedriver" \
  "$root/usr/lib/chromium/chrome_crashpad_handler" "$root"/usr/lib/chromium/{libEGL.so,libGLESv2.so,libvk_swiftshader.so} \
  "$root/usr/lib/chromium/libvulkan.so.1" >"$work/closure.txt"
while read -r soname path; do
  case $path in "$root/usr/lib/chromium/"*) ;; *) cp -L "$path" "$prefix/lib/$soname" ;; esac
done <"$work/closure.txt"
for module in libfreebl3.so libfreeblpriv3.so libnssckbi.so libnssdbm3.so libsoftokn3.so; do  # NSS loads these itself
  cp -L "$root/usr/lib/x86_64-linux-gnu/$module" "$prefix/lib/"
done
cp "$root"/usr/share/fonts/truetype/liberation/LiberationSans-*.ttf \
  "$root"/usr/share/fonts/truetype/liberation/LiberationMono-Regular.ttf "$prefix/fonts/"
cp "$results/debs.txt" "$prefix/debs.txt"

# --- one tar, compressed, in parts -------------------------------------------------------------------------------
tar -C "$prefix" -cf - . | xz -9 -T0 >"$work/browser.tar.xz"
split -b 59M -d "$work/browser.tar.xz" "$work/part-"
i=0
for part in "$work"/part-*; do i=$((i + 1)); mkdir -p "$dest/p$i"; mv "$part" "$dest/p$i/"; done
mv "$work/browser.tar.xz" "$dest/browser.tar.xz"
(cd "$dest" && sha256sum p*/part-* browser.tar.xz whl/*.whl) >"$results/carry.sha256"
rm -f "$dest/browser.tar.xz"
echo "$(du -sh "$prefix" | cut -f1) unpacked ($(wc -l <"$work/closure.txt") libraries), $i parts of at most 59 MiB," \
  "$count wheels ($(du -sh "$dest/whl" | cut -f1)); checksums in $results/carry.sha256"

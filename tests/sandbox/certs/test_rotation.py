"""Certificate rotation in the sandbox (molecule's side effect, before teardown): `site.yml -e dask_tls_renew=true`
renews every host and client certificate from the same CA (new serials, same key and issuer), restarts the
scheduler (with its warning) and the workers host by host, and verification reports the days left. JupyterLab is not
restarted (it holds no TLS connection of its own): a new kernel's client connects with the renewed certificate. A client
with the new bundle computes; one whose certificate has expired is refused. Dask's TLS has no revocation list
(distributed builds its SSL context from ca-file, cert and key only), so a stolen, unexpired certificate stays
valid until it expires or the CA is replaced: the old client certificate is shown to still connect."""
from __future__ import annotations

import datetime
from pathlib import Path

import live
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def serials(folder: Path) -> dict[str, int]:
    return {path.name: x509.load_pem_x509_certificate(path.read_bytes()).serial_number
            for path in sorted(folder.glob("*.crt")) if path.name != "ca.crt"}


def expired_client(tmp: Path, artifacts: Path) -> tuple[str, str]:
    """A client certificate the cluster's CA signed, valid yesterday only."""
    ca_key = serialization.load_pem_private_key((artifacts / "tls" / "ca.key").read_bytes(), password=None)
    ca = x509.load_pem_x509_certificate((artifacts / "tls" / "ca.crt").read_bytes())
    key = ec.generate_private_key(ec.SECP384R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "expired")]))
            .issuer_name(ca.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=2)).not_valid_after(now - datetime.timedelta(days=1))
            .sign(ca_key, hashes.SHA384()))  # type: ignore[arg-type]
    (tmp / "expired.key").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                        serialization.NoEncryption()))
    (tmp / "expired.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return str(tmp / "expired.crt"), str(tmp / "expired.key")


def test_renewal_gives_new_serials_from_the_same_ca_and_the_cluster_keeps_working(tmp_path: Path) -> None:
    artifacts = live.ephemeral_dir() / "artifacts"
    before = {**serials(artifacts / "tls"), **serials(artifacts / "client")}
    ca_before = (artifacts / "tls" / "ca.crt").read_bytes()
    old_client = tmp_path / "old"
    old_client.mkdir()
    for name in ("client.crt", "client.key"):
        (old_client / name).write_bytes((artifacts / "client" / name).read_bytes())

    notebook_started = live.started_at(live.SCHEDULER, live.NOTEBOOK)
    run = live.playbook("site.yml", "-e", "dask_tls_renew=true", timeout=1500)
    assert run.returncode == 0, run.stdout[-4000:]
    assert "WARNING: the scheduler of cluster" in run.stdout
    after = {**serials(artifacts / "tls"), **serials(artifacts / "client")}
    assert sorted(after) == sorted(before) and len(after) == 4, after  # three hosts and the client
    assert all(after[name] != before[name] for name in after), (before, after)
    assert (artifacts / "tls" / "ca.crt").read_bytes() == ca_before
    for host in (live.SCHEDULER, *live.WORKERS):
        installed = x509.load_pem_x509_certificate(live.on_host(host, "cat", "/etc/dask/tls/host.crt").stdout.encode())
        assert installed.serial_number == after[f"{host}.crt"], host

    with live.connect(timeout=60) as client:  # the new bundle
        client.wait_for_workers(len(live.WORKERS), timeout=120)
        assert client.submit(sum, [1, 2, 3], pure=False).result(timeout=60) == 6
    # JupyterLab kept running (its kernels with it); a new kernel connects with the renewed certificate.
    assert live.started_at(live.SCHEDULER, live.NOTEBOOK) == notebook_started, "the renewal restarted JupyterLab"
    kernel = ("import ssl; from distributed import Client\n"  # the image has no cryptography: CPython's decoder
              "print(int(ssl._ssl._test_decode_cert('/etc/dask/tls/host.crt')['serialNumber'], 16))\n"
              "with Client(timeout=60) as client: print(client.submit(sum, [1, 2, 3], pure=False).result(timeout=60))")
    serial, answer = live.in_a_new_process_of(live.SCHEDULER, live.NOTEBOOK, kernel).split()[-2:]
    assert (int(serial), answer) == (after[f"{live.SCHEDULER}.crt"], "6"), (serial, answer)
    refused = live.tls_exchange(expired_client(tmp_path, artifacts))
    assert refused != "answered" and "expired" in refused.lower(), refused
    assert live.tls_exchange((str(old_client / "client.crt"), str(old_client / "client.key"))) == "answered"

    verify = live.playbook("playbooks/verify.yml", timeout=900)
    assert verify.returncode == 0, verify.stdout[-3000:]
    days = [line for line in verify.stdout.splitlines() if "certificates: " in line]
    assert days and any(f" {left} days" in days[0] for left in (824, 825)), days
    live.record("certs", {"renewed": len(after), "same CA": "yes", "expired client": refused[:60],
                          "old client (no revocation)": "answered", "report": days[0].strip()[:160]})

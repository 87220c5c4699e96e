#!/usr/bin/env python3
"""The bundle's monitoring on real GPUs (issue 13), driven by tests/gpu/gpu-proof-monitoring.sh: Prometheus
(the rendered configuration) scraping a running bundle cluster, node exporter and every GPU worker's /metrics.
Each step prints PASS/FAIL lines with its figures and writes a JSON file; exit status 1 when a check fails.

    monitoring_probe.py targets   --want N --out FILE             wait until Prometheus has N targets, all up
    monitoring_probe.py rules     --out FILE                      alert rules loaded and healthy, none firing
    monitoring_probe.py mapping   SCHEDULER --gpus CSV --out FILE worker ports 8790+N, each GPU on its own worker
    monitoring_probe.py workload  SCHEDULER --out FILE [--marker FILE]   utilisation and memory seen by Prometheus
    monitoring_probe.py scrape    --out FILE                      /metrics fetched directly, Prometheus's scrape time
    monitoring_probe.py phase     SCHEDULER --label L --out FILE  no-op task rate and GPU work time (one phase)
    monitoring_probe.py overhead  --phases FILE --out FILE        medians of the phases, on/off ratios
    monitoring_probe.py dashboard --json FILE --rc N              dashboard_queries.py's result in one line
    monitoring_probe.py extract-deb DEB DIR                       a .deb's files without dpkg-deb

SCHEDULER is the TLS address; the client's TLS files come from the DASK_DISTRIBUTED__COMM__TLS__* environment.
"""
from __future__ import annotations

import argparse
import importlib
import io
import json
import lzma
import os
import statistics
import sys
import tarfile
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

PROMETHEUS = "http://127.0.0.1:9090"
GIB = 1 << 30
failures: list[str] = []


def check(ok: bool, text: str) -> bool:
    print(f"{'PASS' if ok else 'FAIL'} {text}", flush=True)
    if not ok:
        failures.append(text)
    return ok


def get_json(url: str, timeout: float = 10) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - loopback URLs
        return json.load(response)


def query(expr: str, at: float | None = None) -> list[dict[str, Any]]:
    """An instant query's result (a vector: [{metric, value: [ts, "v"]}])."""
    params = {"query": expr} | ({"time": f"{at:.3f}"} if at is not None else {})
    body = get_json(f"{PROMETHEUS}/api/v1/query?{urllib.parse.urlencode(params)}")
    if body.get("status") != "success":
        raise RuntimeError(f"query failed: {expr}: {body}")
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


def by_label(result: list[dict[str, Any]], label: str) -> dict[str, float]:
    return {str(row["metric"].get(label, "")): float(row["value"][1]) for row in result}


def write(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


# --- targets and rules ------------------------------------------------------------------------------------------

def targets(args: argparse.Namespace) -> None:
    deadline, active = time.monotonic() + args.timeout, []
    while time.monotonic() < deadline:
        active = get_json(f"{PROMETHEUS}/api/v1/targets?state=active")["data"]["activeTargets"]
        if len(active) >= args.want and all(t["health"] == "up" for t in active):
            break
        time.sleep(0.5)
    rows = [{"job": t["labels"].get("job"), "scrapeUrl": t["scrapeUrl"], "health": t["health"],
             "lastScrapeDuration": t["lastScrapeDuration"], "lastError": t["lastError"],
             "labels": t["labels"]} for t in active]
    write(args.out, rows)
    for row in sorted(rows, key=lambda r: (str(r["job"]), r["scrapeUrl"])):
        print(f"  {row['job']:15s} {row['scrapeUrl']:40s} {row['health']:5s} "
              f"{row['lastScrapeDuration'] * 1e3:7.2f} ms {row['lastError']}")
    up = sum(row["health"] == "up" for row in rows)
    check(len(rows) >= args.want and up == len(rows), f"Prometheus targets: {up} of {len(rows)} up "
          f"(want {args.want}): " + ", ".join(sorted(f"{r['job']}={r['health']}" for r in rows)))


def rules(args: argparse.Namespace) -> None:
    groups = get_json(f"{PROMETHEUS}/api/v1/rules")["data"]["groups"]
    loaded = [(g["name"], r["name"], r.get("health"), r.get("state"), r.get("lastError", ""))
              for g in groups for r in g["rules"]]
    alerts = get_json(f"{PROMETHEUS}/api/v1/alerts")["data"]["alerts"]
    write(args.out, {"rules": loaded, "alerts": alerts})
    bad = [rule for rule in loaded if rule[2] != "ok"]
    check(len(loaded) >= args.want and not bad, f"alert rules loaded from /etc/prometheus/dask-alerts.yml: "
          f"{len(loaded)} in {len(groups)} groups, {len(bad)} unhealthy {bad}")
    active = [f"{a['labels'].get('alertname')}={a.get('state')}" for a in alerts]
    check(not active, f"no alert pending or firing on the healthy cluster: {active or 'none'}")


# --- cluster side -----------------------------------------------------------------------------------------------

def worker_identity(dask_worker: Any) -> dict[str, Any]:
    """This worker's HTTP port and the GPU its CUDA device 0 is: its PCI address from the CUDA runtime, looked up
    in NVML (else the UUID in the CUDA device properties): not the CUDA_VISIBLE_DEVICES the collector reads."""
    import cupy
    import pynvml

    info: dict[str, Any] = {"port": dask_worker.http_server.port, "name": str(dask_worker.name), "uuid": "",
                            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES", "")}
    props = cupy.cuda.runtime.getDeviceProperties(0)
    try:
        bus = f"{props['pciDomainID']:08X}:{props['pciBusID']:02X}:{props['pciDeviceID']:02X}.0"
        pynvml.nvmlInit()
        uuid = pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByPciBusId(bus))
        info.update(pci_bus_id=bus, uuid=uuid.decode() if isinstance(uuid, bytes) else str(uuid), source="pci")
    except Exception as error:  # noqa: BLE001 - reported, then the properties' UUID
        info["pci_error"] = repr(error)
        raw = props.get("uuid")
        if isinstance(raw, bytes) and len(raw) == 16:
            text = raw.hex()
            info.update(uuid=f"GPU-{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}",
                        source="cuda uuid")
    return info


def gpu_labels(port: int) -> tuple[dict[str, str], float]:
    """The gpu_* labels of a worker's /metrics on PORT and how long the fetch took (s)."""
    from prometheus_client.parser import text_string_to_metric_families

    started = time.perf_counter()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:  # noqa: S310
        text = response.read().decode()
    seconds = time.perf_counter() - started
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "dask_worker_gpu_memory_used_bytes":
                return dict(sample.labels), seconds
    return {}, seconds


def machine_gpus(path: Path) -> list[dict[str, str]]:
    """nvidia-smi --query-gpu=index,uuid,pci.bus_id --format=csv,noheader."""
    rows = []
    for line in path.read_text().splitlines():
        if line.strip():
            index, uuid, bus = (part.strip() for part in line.split(","))
            rows.append({"index": index, "uuid": uuid, "pci_bus_id": bus.upper()})
    return rows


def distributed() -> Any:
    """The distributed package (imported here: the extract-deb step runs before the wheels are installed)."""
    return importlib.import_module("distributed")


def connect(scheduler: str) -> Any:
    return distributed().Client(scheduler, timeout=60)


def mapping(args: argparse.Namespace) -> None:
    gpus = machine_gpus(args.gpus)
    index_of = {gpu["uuid"]: int(gpu["index"]) for gpu in gpus}
    with connect(args.scheduler) as client:
        workers: dict[str, dict[str, Any]] = client.run(worker_identity)
    for address, info in sorted(workers.items()):
        try:
            info["metrics_labels"], _ = gpu_labels(info["port"])
        except OSError as error:
            info["metrics_labels"] = {"error": repr(error)}
        print(f"  {address} name={info['name']} port={info['port']} CUDA_VISIBLE_DEVICES={info['cuda_visible_devices']}"
              f" own GPU {info['uuid']} ({info.get('pci_bus_id', info.get('pci_error'))}, {info.get('source')}); "
              f"/metrics labels {info['metrics_labels']}")
    ports = sorted(info["port"] for info in workers.values())
    check(ports == [8790 + n for n in range(len(gpus))],
          f"worker HTTP ports {ports} (want {[8790 + n for n in range(len(gpus))]}, one per GPU)")
    for address, info in sorted(workers.items()):
        want_port = 8790 + index_of.get(info["uuid"], -9999)
        check(info["port"] == want_port, f"{address}: its GPU is index {index_of.get(info['uuid'])}, "
              f"its /metrics on port {info['port']} (want {want_port})")
        check(info["metrics_labels"].get("gpu_uuid") == info["uuid"],
              f"{address}: :{info['port']}/metrics gpu_uuid={info['metrics_labels'].get('gpu_uuid')} "
              f"is the worker's own CUDA device {info['uuid']}")
    # What Prometheus stored: each GPU once, on the target of the worker that owns it.
    series = query('dask_worker_gpu_memory_used_bytes{job="dask-workers"}')
    port_of = {info["uuid"]: info["port"] for info in workers.values()}
    stored = [(str(row["metric"].get("gpu_uuid")), str(row["metric"].get("instance")), str(row["metric"].get("worker")))
              for row in series]
    for gpu in gpus:
        found = [s for s in stored if s[0] == gpu["uuid"]]
        want = f"127.0.0.1:{port_of.get(gpu['uuid'])}"
        check(len(found) == 1 and found[0][1] == want and found[0][2] == gpu["index"],
              f"GPU {gpu['index']} {gpu['uuid']} in Prometheus: {found} (want once, instance {want}, worker "
              f"{gpu['index']})")
    check(len(stored) == len(gpus), f"{len(stored)} GPU series in Prometheus for {len(gpus)} GPUs")
    write(args.out, {"gpus": gpus, "workers": workers, "prometheus": stored})


def busy(seconds: float) -> int:
    import cupy

    x = cupy.random.random((8192, 8192))
    end, loops = time.monotonic() + seconds, 0
    while time.monotonic() < end:
        x = x @ x
        x /= float(cupy.abs(x).max())
        loops += 1
    return loops


def hold(nbytes: int) -> Any:
    import cupy

    return cupy.ones(nbytes // 8, dtype="f8")


def workload(args: argparse.Namespace) -> None:
    wait = distributed().wait
    allocate = int(args.hold_gib * GIB)
    interval = args.interval
    with connect(args.scheduler) as client:
        workers: dict[str, dict[str, Any]] = client.run(worker_identity)
        addresses = sorted(workers)
        # Warm-up: CuPy, cuBLAS and the memory pool's matmul buffers exist before the baseline is taken.
        warm = [client.submit(busy, 2.0, workers=[a], pure=False) for a in addresses]
        wait(warm, timeout=120)
        time.sleep(2 * interval + 1)  # a scrape after the warm-up
        baseline = by_label(query('dask_worker_gpu_memory_used_bytes{job="dask-workers"}'), "gpu_uuid")
        held = [client.submit(hold, allocate, workers=[a], pure=False) for a in addresses]
        wait(held, timeout=120)
        started = time.time()
        work = {a: client.submit(busy, args.seconds, workers=[a], pure=False) for a in addresses}
        if args.marker:
            args.marker.write_text(f"{started}\n")
        loops = {a: future.result(timeout=args.seconds + 120) for a, future in work.items()}
        ended = time.time()
        time.sleep(interval + 1)  # the last scrape of the window is stored
        window = f"{max(1, int(ended - started))}s"
        peak = by_label(query(f'max_over_time(dask_worker_gpu_utilization_ratio{{job="dask-workers"}}[{window}])',
                              ended), "gpu_uuid")
        mean = by_label(query(f'avg_over_time(dask_worker_gpu_utilization_ratio{{job="dask-workers"}}[{window}])',
                              ended), "gpu_uuid")
        samples = by_label(query(f'count_over_time(dask_worker_gpu_utilization_ratio{{job="dask-workers"}}[{window}])',
                                 ended), "gpu_uuid")
        memory = {kind: by_label(query(f'{kind}_over_time(dask_worker_gpu_memory_used_bytes{{job="dask-workers"}}'
                                       f'[{window}])', ended), "gpu_uuid") for kind in ("min", "avg", "max")}
        power = by_label(query(f'max_over_time(dask_worker_gpu_power_watts{{job="dask-workers"}}[{window}])', ended),
                         "gpu_uuid")
        del held
    results = {}
    for address in addresses:
        uuid = workers[address]["uuid"]
        base = baseline.get(uuid, float("nan"))
        delta = {kind: memory[kind].get(uuid, float("nan")) - base for kind in memory}
        results[uuid] = {"worker": address, "port": workers[address]["port"], "loops": loops[address],
                         "utilization_max": peak.get(uuid), "utilization_avg": mean.get(uuid),
                         "samples": samples.get(uuid), "baseline_bytes": base, "delta_bytes": delta,
                         "power_max_watts": power.get(uuid)}
        check(peak.get(uuid, 0.0) > 0.5,
              f"GPU {uuid} (:{workers[address]['port']}): utilisation max_over_time {peak.get(uuid, 0.0):.0%}, "
              f"avg {mean.get(uuid, 0.0):.0%} over {samples.get(uuid, 0):.0f} scrapes in {window} "
              f"({loops[address]} fp64 8192^2 matmuls; target max > 50 %)")
        worst = max(abs(delta[kind] - allocate) for kind in delta)
        check(worst <= 0.05 * allocate,
              f"GPU {uuid}: memory used during the workload - baseline = {delta['avg'] / GIB:.3f} GiB avg "
              f"(min {delta['min'] / GIB:.3f}, max {delta['max'] / GIB:.3f}) for a {allocate / GIB:g} GiB CuPy array "
              f"(baseline {base / GIB:.2f} GiB; target within 5 %)")
    write(args.out, {"window": window, "started": started, "ended": ended, "allocate_bytes": allocate,
                     "gpus": results})


# --- scrape time ------------------------------------------------------------------------------------------------

def scrape(args: argparse.Namespace) -> None:
    ports = sorted(int(t["scrapeUrl"].rsplit(":", 1)[1].split("/")[0])
                   for t in get_json(f"{PROMETHEUS}/api/v1/targets?state=active")["data"]["activeTargets"]
                   if t["labels"].get("job") == "dask-workers")
    direct = {}
    for port in ports:
        times = [gpu_labels(port)[1] for _ in range(args.fetches)]
        direct[port] = {"median_ms": statistics.median(times) * 1e3, "max_ms": max(times) * 1e3}
        check(direct[port]["median_ms"] < 50, f":{port}/metrics fetched directly {args.fetches} times: median "
              f"{direct[port]['median_ms']:.1f} ms, max {direct[port]['max_ms']:.1f} ms (target < 50 ms)")
    window = args.window
    prom = {}
    for stat in ("avg", "max"):
        prom[stat] = by_label(query(f'{stat}_over_time(scrape_duration_seconds{{job="dask-workers"}}[{window}])'),
                              "instance")
    prom["last"] = by_label(query('scrape_duration_seconds{job="dask-workers"}'), "instance")
    prom["samples"] = by_label(query(f'count_over_time(scrape_duration_seconds{{job="dask-workers"}}[{window}])'),
                               "instance")
    for instance in sorted(prom["max"]):
        check(prom["max"][instance] < 0.05,
              f"Prometheus scrape_duration_seconds{{job=\"dask-workers\",instance=\"{instance}\"}} over {window} "
              f"({prom['samples'].get(instance, 0):.0f} scrapes, workload included): avg "
              f"{prom['avg'][instance] * 1e3:.1f} ms, max {prom['max'][instance] * 1e3:.1f} ms, last "
              f"{prom['last'].get(instance, float('nan')) * 1e3:.1f} ms (target < 50 ms)")
    others = {stat: by_label(query(f'{stat}_over_time(scrape_duration_seconds[{window}])'), "job")
              for stat in ("avg", "max")}
    write(args.out, {"direct": direct, "prometheus_dask_workers": prom, "prometheus_by_job": others})


# --- on/off overhead --------------------------------------------------------------------------------------------

def noop(x: int) -> int:
    return x


def phase(args: argparse.Namespace) -> None:
    from dask_gpu_verify import bench

    phase_started = time.time()
    with connect(args.scheduler) as client:
        addresses = sorted(client.scheduler_info()["workers"])
        client.gather(client.map(noop, range(200), pure=False))  # warm-up
        rates = []
        for _ in range(args.repeats):
            started = time.perf_counter()
            client.gather(client.map(noop, range(args.tasks), pure=False))
            rates.append(args.tasks / (time.perf_counter() - started))
        trips = []
        for i in range(50):
            begin = time.perf_counter()
            client.submit(noop, i, pure=False).result()
            trips.append(time.perf_counter() - begin)
        n, chunk = bench.SIZES["cupy"]["gram"]
        graph = bench.gram_graph(n, chunk, "cupy")
        gram, gram_times = bench.median_time(
            lambda: client.compute(graph, workers=addresses, allow_other_workers=False).result(), args.runs)
        matmul = [client.submit(busy_fixed, args.matmuls, workers=[a], pure=False) for a in addresses]
        matmul_started = time.perf_counter()
        gpu_seconds: list[float] = client.gather(matmul)
        matmul_seconds = time.perf_counter() - matmul_started
    scrapes = None
    window = f"{max(1, int(time.time() - phase_started))}s"
    if args.on:
        scrapes = by_label(query(f'count_over_time(up{{job="dask-workers"}}[{window}])'), "instance")
    row = {"label": args.label, "on": args.on, "tasks": args.tasks, "tasks_per_s": statistics.median(rates),
           "rates": rates, "round_trip_ms": statistics.median(trips) * 1e3, "gram_seconds": gram,
           "gram_times": gram_times, "matmul_seconds": matmul_seconds, "matmul_gpu_seconds": max(gpu_seconds),
           "matmuls": args.matmuls, "phase_seconds": time.time() - phase_started,
           "worker_scrapes_in_phase": scrapes, "when": time.time()}
    with args.out.open("a") as handle:
        handle.write(json.dumps(row) + "\n")
    print(f"  {args.label:5s} monitoring {'on ' if args.on else 'off'}: {row['tasks_per_s']:7.0f} no-op tasks/s "
          f"({', '.join(f'{r:.0f}' for r in rates)}), round trip {row['round_trip_ms']:.2f} ms, gram "
          f"{gram:.3f} s, {args.matmuls} matmuls per GPU {matmul_seconds:.3f} s (in the worker "
          f"{max(gpu_seconds):.3f} s)" + (f", worker scrapes in the {window} phase {scrapes}" if scrapes else ""),
          flush=True)


def busy_fixed(count: int) -> float:
    """COUNT fp64 8192^2 matmuls on this worker's GPU (a fixed amount of work); returns the seconds it took."""
    import cupy

    x = cupy.random.random((8192, 8192))
    y = cupy.empty_like(x)
    cupy.cuda.Device().synchronize()
    started = time.perf_counter()
    for _ in range(count):
        cupy.matmul(x, x, out=y)
    cupy.cuda.Device().synchronize()
    return time.perf_counter() - started


def overhead(args: argparse.Namespace) -> None:
    rows = [json.loads(line) for line in args.phases.read_text().splitlines() if line.strip()]
    summary: dict[str, Any] = {"phases": rows}
    for key in ("tasks_per_s", "round_trip_ms", "gram_seconds", "matmul_seconds", "matmul_gpu_seconds"):
        on = statistics.median(r[key] for r in rows if r["on"])
        off = statistics.median(r[key] for r in rows if not r["on"])
        summary[key] = {"on": on, "off": off, "on_over_off": on / off, "off_over_on": off / on}
    for r in rows:
        print(f"  {r['label']:5s} {'on ' if r['on'] else 'off'} {r['tasks_per_s']:7.0f} tasks/s, round trip "
              f"{r['round_trip_ms']:.2f} ms, gram {r['gram_seconds']:.3f} s, matmul loop {r['matmul_seconds']:.3f} s "
              f"(in the worker {r['matmul_gpu_seconds']:.3f} s), worker scrapes {r['worker_scrapes_in_phase']}")
    rate = summary["tasks_per_s"]
    check(rate["on_over_off"] >= 0.98, f"no-op task rate, monitoring on (1 s scrapes) / off: {rate['on']:.0f} / "
          f"{rate['off']:.0f} tasks/s = {rate['on_over_off']:.3f} (medians of "
          f"{sum(r['on'] for r in rows)} on and {sum(not r['on'] for r in rows)} off phases; target >= 0.98)")
    for key, what in (("gram_seconds", "gram (dask array of CuPy blocks on every GPU), s"),
                      ("matmul_seconds", "fixed fp64 matmul loop on every GPU, s through the client"),
                      ("matmul_gpu_seconds", "the same loop timed in the worker, s"),
                      ("round_trip_ms", "submit-to-result round trip, ms")):
        figure = summary[key]
        print(f"INFO {what}: off {figure['off']:.4g} / on {figure['on']:.4g}: off/on = {figure['off_over_on']:.3f} "
              "(time ratio: below 1 means slower with monitoring on)", flush=True)
    write(args.out, summary)


def dashboard(args: argparse.Namespace) -> None:
    """One line from dashboard_queries.py's --json output and its exit status."""
    rows = json.loads(args.json.read_text()) if args.json.exists() else []
    empty = sorted({str(r["panel"]) for r in rows if not r["series"]})
    gpu = [r for r in rows if r["gpu"]]
    check(args.rc == 0 and bool(rows) and not empty,
          f"dashboard_queries.py (every panel, GPU panels included; exit {args.rc}): "
          f"{sum(r['series'] > 0 for r in rows)} of {len(rows)} queries in {len({r['panel'] for r in rows})} panels "
          f"return series, GPU queries {sum(r['series'] > 0 for r in gpu)} of {len(gpu)}; empty: {empty or 'none'}")


# --- .deb without dpkg-deb --------------------------------------------------------------------------------------

def extract_deb(args: argparse.Namespace) -> None:
    """A .deb is an ar archive; its data.tar.* member holds the files."""
    data = args.deb.read_bytes()
    if not data.startswith(b"!<arch>\n"):
        raise SystemExit(f"{args.deb}: not an ar archive")
    offset = 8
    while offset + 60 <= len(data):
        header = data[offset:offset + 60]
        name = header[:16].decode().strip().rstrip("/")
        size = int(header[48:58].decode().strip())
        body = data[offset + 60:offset + 60 + size]
        offset += 60 + size + (size % 2)
        if name.startswith("data.tar"):
            raw = lzma.decompress(body) if name.endswith(".xz") else body
            with tarfile.open(fileobj=io.BytesIO(raw)) as archive:  # files and folders only: no links
                members = [m for m in archive.getmembers() if m.isfile() or m.isdir()]
                archive.extractall(args.dest, members=members, filter="tar")
            return
    raise SystemExit(f"{args.deb}: no data.tar member")


def main() -> int:
    global PROMETHEUS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prometheus", default=PROMETHEUS)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("targets")
    p.add_argument("--want", type=int, required=True)
    p.add_argument("--timeout", type=float, default=60)
    p.add_argument("--out", type=Path, required=True)
    p = sub.add_parser("rules")
    p.add_argument("--want", type=int, default=1)
    p.add_argument("--out", type=Path, required=True)
    p = sub.add_parser("mapping")
    p.add_argument("scheduler")
    p.add_argument("--gpus", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p = sub.add_parser("workload")
    p.add_argument("scheduler")
    p.add_argument("--seconds", type=float, default=30)
    p.add_argument("--hold-gib", type=float, default=8)
    p.add_argument("--interval", type=float, default=5, help="Prometheus's scrape interval (s)")
    p.add_argument("--marker", type=Path, help="written when the busy phase starts")
    p.add_argument("--out", type=Path, required=True)
    p = sub.add_parser("scrape")
    p.add_argument("--fetches", type=int, default=20)
    p.add_argument("--window", default="5m")
    p.add_argument("--out", type=Path, required=True)
    p = sub.add_parser("phase")
    p.add_argument("scheduler")
    p.add_argument("--label", required=True)
    p.add_argument("--on", action="store_true", help="Prometheus and node exporter are running")
    p.add_argument("--tasks", type=int, default=2000)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--matmuls", type=int, default=100)
    p.add_argument("--out", type=Path, required=True)
    p = sub.add_parser("overhead")
    p.add_argument("--phases", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p = sub.add_parser("dashboard")
    p.add_argument("--json", type=Path, required=True)
    p.add_argument("--rc", type=int, required=True)
    p = sub.add_parser("extract-deb")
    p.add_argument("deb", type=Path)
    p.add_argument("dest", type=Path)
    args = parser.parse_args()
    PROMETHEUS = args.prometheus.rstrip("/")
    {"targets": targets, "rules": rules, "mapping": mapping, "workload": workload, "scrape": scrape,
     "phase": phase, "overhead": overhead, "dashboard": dashboard, "extract-deb": extract_deb}[args.command](args)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

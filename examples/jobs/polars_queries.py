"""A job: Polars queries on the cluster's GPUs through cudf-polars' DaskEngine (images of dask_image_profile polars).

    ansible-playbook -i INVENTORY playbooks/job.yml -e dask_job_script=examples/jobs/polars_queries.py \
      -e dask_job_args=10,q1,q18

Arguments: the scale of the PDS-H-like tables (1 = 6 M line items; written once on every worker host, beside the
workers' local directory), then the queries (dask_gpu_verify.pdsh: q1 q3 q6 q10 q18; default all). Each query runs
on every GPU worker of the cluster (one engine rank each) and, for comparison, on CPU Polars on a worker host (all its
cores); the job fails when a result differs. The job's container sees the workers' local directory read-only, where
the tables are (Polars plans a query where it is collected: the client reads the files' schemas). `--engine cpu`
runs CPU Polars alone, on tables it writes itself (a dry run without a cluster).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from dask_gpu_verify import gpu_polars, pdsh


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scale", type=float, help="scale of the tables (1 = 6 M line items)")
    parser.add_argument("queries", nargs="*", default=["all"], help="q1 q3 q6 q10 q18 (default all)")
    parser.add_argument("--engine", choices=["dask", "cpu"], default="dask")
    parser.add_argument("--folder", default=None, help="the tables (default: beside the workers' local directory)")
    args = parser.parse_args(argv)
    names = ",".join(args.queries)
    chosen = list(pdsh.selected(names))
    if args.engine == "cpu":
        folder = Path(args.folder or "pdsh-tables")
        print(pdsh.generate_local(folder, args.scale))
        for name, build in chosen:
            started = time.perf_counter()
            result = build(folder).collect()
            print(f"{name}: {time.perf_counter() - started:.3f} s on CPU Polars", result, sep="\n")
        return 0

    from distributed import Client

    with Client() as client:  # DASK_SCHEDULER_ADDRESS and the TLS files come with the job's container
        made = gpu_polars.generate(client, args.scale, args.folder, "the job's scale")
        folder = Path(next(iter(made["folders"].values())))
        print(f"tables: scale {args.scale:g}, {made['bytes'] / 1e9:.1f} GB in {folder} ({made['seconds']} s)")
        digests = {}
        with gpu_polars.engine(client) as engine:
            for name, build in chosen:
                started = time.perf_counter()
                result = build(folder).collect(engine=engine)
                print(f"{name}: {time.perf_counter() - started:.3f} s on {engine.nranks} GPUs", result, sep="\n")
                digests[name] = gpu_polars.result_digest(result)
        worker = sorted(client.scheduler_info(n_workers=-1)["workers"])[0]
        cpu = client.submit(gpu_polars.cpu_queries, str(folder), names, 1, workers=[worker], pure=False).result()
        failed = [name for name, digest in digests.items() if (cpu.get(name) or {}).get("digest") != digest]
        if failed:
            print(f"results differ from CPU Polars: {', '.join(failed)}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

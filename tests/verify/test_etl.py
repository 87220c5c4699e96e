"""The seeds-like ETL (dask_gpu_verify.etl) on the CPU path: its check values equal an exact computation in whole
cents; the data is made once, the same every time, and cut into the partitions asked for; the command line refuses
settings that mean nothing. The GPU path runs on a real GPU (tests/gpu/gpu-proof-etl.sh)."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pandas
import pytest
from dask_gpu_verify import etl
from distributed import Client, LocalCluster


@pytest.fixture(scope="module")
def client() -> Iterator[Client]:
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            Client(cluster) as connected:
        yield connected


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> etl.Data:
    made = etl.Data(tmp_path_factory.mktemp("etl"), rows=20_000, files=2)
    etl.generate(made)
    return made


def exact_checks(data: etl.Data) -> dict[str, list[list[float | int]]]:
    """The same ETL in one pandas process, every sum in integer cents: no float rounding anywhere."""
    facts = pandas.concat([pandas.read_csv(p) for p in data.facts])
    facts["cents"] = (facts["x"] * 100).round().astype("int64")
    facts["peak"] = (facts["y"] * 100).round().astype("int64")
    kept = facts[(facts["cents"] >= 1000) & (facts["qty"] > 1)]
    by_id = kept.groupby("id").agg(amount=("cents", "sum"), peak=("peak", "max"), rows=("qty", "count")).reset_index()
    joined = by_id.merge(pandas.read_csv(data.dim), on="id")
    joined["value"] = joined["amount"] * joined["weight"]
    region = joined.groupby("region").agg(value=("value", "sum"), rows=("rows", "sum"), peak=("peak", "max"))
    labelled = kept.merge(pandas.read_csv(data.cats), on="cat")
    labelled["scaled"] = labelled["cents"] * labelled["rate"]
    label = labelled.groupby("label").agg(scaled=("scaled", "sum"), qty=("qty", "sum"))
    return {"per_region": [[int(k), int(r.value) / 100, int(r.rows), int(r.peak) / 100] for k, r in region.iterrows()],
            "per_label": [[int(k), int(r.scaled) / 100, int(r.qty)] for k, r in label.iterrows()]}


def test_the_check_values_are_exact(client: Client, data: etl.Data) -> None:
    report = etl.run(client, etl.Plan(data, "pandas", partitions=4, shuffle="tasks"), passes=1)
    assert report["checks"] == exact_checks(data)
    assert len(report["checks"]["per_region"]) == etl.REGIONS and len(report["checks"]["per_label"]) == etl.LABELS
    assert report["partitions"] == 4 and report["generate"]["reused"] is True
    assert set(report["steps"]) == set(etl.STEPS) and report["seconds"] == pytest.approx(sum(report["steps"].values()))
    assert report["check_digest"] == etl.digest(report["checks"]) and report["checks_stable"] is True


def test_the_data_is_the_same_every_time(data: etl.Data, tmp_path: Path) -> None:
    again = etl.Data(tmp_path, data.rows, data.files)
    assert etl.generate(again)["reused"] is False and etl.generate(again)["reused"] is True
    for mine, theirs in zip([*data.facts, data.dim, data.cats], [*again.facts, again.dim, again.cats], strict=True):
        assert mine.read_bytes() == theirs.read_bytes()
    assert data.facts[0].read_text().splitlines()[0] == "id,cat,x,y,qty"
    again.facts[1].write_text("id,cat,x,y,qty\n")  # a changed file is made again
    assert etl.generate(again)["reused"] is False


@pytest.mark.parametrize("backend", ["pandas", "cudf"])
@pytest.mark.parametrize("per_file", [1, 3, 8])
def test_the_block_size_cuts_each_file_evenly(tmp_path: Path, backend: str, per_file: int) -> None:
    sizes = [100_003, 100_000, 99_991]
    paths = []
    for i, size in enumerate(sizes):
        paths.append(tmp_path / f"{i}.csv")
        paths[-1].write_bytes(b"x" * size)
    size = etl.blocksize(backend, paths, per_file)
    # dask_cudf: ceil(size / blocksize) blocks per file; dask.dataframe's read_bytes: size // blocksize
    blocks = [-(-s // size) if backend == "cudf" else max(1, s // size) for s in sizes]
    assert blocks == [per_file] * len(sizes)


def test_rounding_to_cents_hides_the_summation_order() -> None:
    frame = pandas.DataFrame({"region": [1], "value": [0.1 + 0.2], "rows": [2], "peak": [0.3]}).set_index("region")
    label = pandas.DataFrame({"label": [0], "scaled": [1e9 + 0.07 - 1e-7], "qty": [3]}).set_index("label")
    assert etl.check_values(frame, label) == {"per_region": [[1, 0.3, 2, 0.3]], "per_label": [[0, 1000000000.07, 3]]}


@pytest.mark.parametrize(("argv", "message"), [
    (["--local-cpu", "8", "--backend", "cudf"], "cuDF needs --local-cuda or --scheduler"),
    (["--local-cuda", "--backend", "pandas"], "pandas needs --local-cpu or --scheduler"),
    (["--local-cpu", "0"], "at least 1 worker"),
    (["--scheduler", "tcp://h:8786", "--threads", "2"], "--threads is for --local-cpu"),
    (["--scheduler", "tcp://h:8786", "--rmm-pool-size", "0.8"], "--rmm-pool-size is for --local-cuda"),
    (["--local-cpu", "8", "--enable-cudf-spill"], "--enable-cudf-spill is for --local-cuda"),
    (["--scheduler", "tcp://h:8786", "--enable-cudf-spill"], "--enable-cudf-spill is for --local-cuda"),
    (["--local-cuda", "--files", "8", "--partitions", "12"], "--partitions must be a multiple of --files (8)"),
    (["--local-cuda", "--files", "8", "--partitions", "4"], "--partitions must be a multiple of --files (8)"),
    (["--local-cuda", "--rows", "3", "--files", "8"], "at least one row per file"),
    (["--local-cuda", "--passes", "0"], "--passes must be at least 1"),
    (["--local-cuda", "--shuffle", "disk"], "invalid choice: 'disk'"),
    (["--local-cuda", "--local-cpu", "8"], "not allowed with argument"),
    (["--rows", "10"], "one of the arguments --scheduler --local-cpu --local-cuda is required"),
])
def test_the_command_line_refuses_what_means_nothing(argv: list[str], message: str,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        etl.main(argv)
    assert exited.value.code == 2 and message in capsys.readouterr().err


def test_the_command_line_fills_in_the_defaults() -> None:
    p = etl.parser()
    args = etl.validate(p, p.parse_args(["--local-cpu", "8"]))
    assert (args.backend, args.partitions, args.files, args.rows, args.shuffle, args.passes) == (
        "pandas", 8, 8, 96_000_000, "tasks", 2)
    args = etl.validate(p, p.parse_args(["--scheduler", "tcp://h:8786", "--partitions", "64"]))
    assert (args.backend, args.partitions) == ("cudf", 64)
    assert etl._pool_size("0.8") == 0.8 and etl._pool_size("64GiB") == "64GiB" and etl._pool_size(None) is None

"""PDS-H-like data and queries for Polars: a generator that runs where the data will be read (on the GPUs of the
workers through cuDF, else NumPy), and five queries in the shape of TPC-H's 1, 3, 6, 10 and 18.

The tables are those of PDS-H, narrowed to the columns the queries read and made of whole numbers, so every engine
must return exactly the same result: money in whole dollars (sums stay within 64 bits up to scale 1,000), discounts
and taxes in percent, dates as day numbers (days since 1970-01-01), flags and names as small codes. Scale 1 is 6 M
line items, 1.5 M orders and 150,000 customers. Files are written per table in parts of at most PART_ROWS rows; a
part's rows come from a seed of its own, so every host that writes a part writes the same bytes (a multi-host
cluster has the data on every host).

It is not TPC-H: the data's distributions are uniform, and the queries are read from the specification's text, not
its templates; the figures are not TPC-H results.
"""
from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SEED = 42
PART_ROWS = 25_000_000
LINEITEM, ORDERS, CUSTOMER = 6_000_000, 1_500_000, 150_000  # rows per unit of scale
NATIONS, REGIONS, SEGMENTS, PRIORITIES, SHIPMODES = 25, 5, 5, 5, 7
FIRST_DAY, LAST_DAY = 8035, 10591  # 1992-01-01 .. 1998-12-31
# Bytes a row takes in memory (int64, int32 and int8 columns below): what a scale costs in GPU memory.
ROW_BYTES = {"lineitem": 8 * 5 + 4 * 3 + 1 * 3, "orders": 8 * 3 + 4 + 1, "customer": 8 + 1 + 1 + 8, "nation": 3}


def day(text: str) -> int:
    """The day number of an ISO date (the queries' constants)."""
    import datetime

    return (datetime.date.fromisoformat(text) - datetime.date(1970, 1, 1)).days


def rows(table: str, scale: float) -> int:
    per = {"lineitem": LINEITEM, "orders": ORDERS, "customer": CUSTOMER}
    return NATIONS if table == "nation" else max(1, int(per[table] * scale))


def parts(table: str, scale: float) -> list[tuple[int, int]]:
    """(first row, row count) of each part of a table."""
    total = rows(table, scale)
    return [(start, min(PART_ROWS, total - start)) for start in range(0, total, PART_ROWS)]


# Parquet on disk against the bytes in memory: 0.32 measured (scale 500: 60.0 GB written, 188 GB in memory; 4 x H200,
# 2026-11-28); the disk check asks for 0.5 of the in-memory bytes, half again over what was measured.
ON_DISK = 0.5


def footprint(scale: float) -> int:
    """Bytes the tables take in memory, uncompressed."""
    return sum(rows(table, scale) * ROW_BYTES[table] for table in ROW_BYTES)


@dataclass(frozen=True)
class Part:
    table: str
    index: int
    start: int
    count: int
    scale: float

    def path(self, folder: Path) -> Path:
        return folder / self.table / f"part-{self.index:04d}.parquet"


def plan(scale: float) -> list[Part]:
    """Every part of every table, the largest first (they take longest)."""
    found = [Part(table, index, start, count, scale) for table in ("lineitem", "orders", "customer", "nation")
             for index, (start, count) in enumerate(parts(table, scale))]
    return sorted(found, key=lambda part: -part.count)


def _columns(part: Part, xp: Any) -> dict[str, Any]:
    """A part's columns as arrays of `xp` (NumPy or CuPy), from the part's own seed."""
    table = ("lineitem", "orders", "customer", "nation").index(part.table)
    rng = xp.random.default_rng(SEED * 1_000_000 + table * 100_000 + part.index)
    n, scale = part.count, part.scale

    def ints(low: int, high: int, dtype: str = "int64") -> Any:
        return rng.integers(low, high, n).astype(dtype)

    if part.table == "lineitem":
        ship = ints(FIRST_DAY, LAST_DAY - 60, "int32")
        return {"l_orderkey": ints(0, rows("orders", scale)), "l_quantity": ints(1, 51),
                "l_extendedprice": ints(900, 105_001), "l_discount": ints(0, 11), "l_tax": ints(0, 9),
                "l_returnflag": ints(0, 3, "int8"), "l_linestatus": ints(0, 2, "int8"),
                "l_shipdate": ship, "l_commitdate": (ship + ints(1, 31, "int32")).astype("int32"),
                "l_receiptdate": (ship + ints(1, 31, "int32")).astype("int32"),
                "l_shipmode": ints(0, SHIPMODES, "int8")}
    if part.table == "orders":
        return {"o_orderkey": xp.arange(part.start, part.start + n, dtype="int64"),
                "o_custkey": ints(0, rows("customer", scale)), "o_totalprice": ints(1_000, 500_000),
                "o_orderdate": ints(FIRST_DAY, LAST_DAY - 150, "int32"),
                "o_orderpriority": ints(0, PRIORITIES, "int8")}
    if part.table == "customer":
        return {"c_custkey": xp.arange(part.start, part.start + n, dtype="int64"),
                "c_nationkey": ints(0, NATIONS, "int8"), "c_mktsegment": ints(0, SEGMENTS, "int8"),
                "c_acctbal": ints(-999, 9_999)}
    keys = xp.arange(NATIONS, dtype="int8")
    return {"n_nationkey": keys, "n_regionkey": (keys % REGIONS).astype("int8"), "n_name": keys}


def write_part(folder: str, part: Part) -> int:
    """Write one part (on the GPU through cuDF where it imports, else through NumPy and Polars); its bytes."""
    path = part.path(Path(folder))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    try:
        import cudf
        import cupy
    except ImportError:
        import numpy
        import polars

        polars.DataFrame(_columns(part, numpy)).write_parquet(tmp)
    else:
        cudf.DataFrame(_columns(part, cupy)).to_parquet(str(tmp), index=False)
        cupy.get_default_memory_pool().free_all_blocks()  # CuPy's cache would keep the GPU's memory from others
    tmp.replace(path)
    return path.stat().st_size


def manifest(scale: float) -> dict[str, Any]:
    return {"seed": SEED, "scale": scale, "part_rows": PART_ROWS,
            "tables": {table: rows(table, scale) for table in ROW_BYTES}}


def ready(folder: Path, scale: float) -> bool:
    """The folder holds these exact tables (its manifest says so and every part is there)."""
    path = folder / "manifest.json"
    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    return found == manifest(scale) and all(part.path(folder).exists() for part in plan(scale))


def space_problem(folder: Path, scale: float, setting: str) -> str | None:
    """Why the disk under `folder` cannot hold this scale (named by the setting that chose it), or None."""
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    free, wanted = shutil.disk_usage(existing).free, int(footprint(scale) * ON_DISK)
    if free >= wanted:
        return None
    return (f"{setting}={scale:g}: the PDS-H-like tables take up to {wanted / 2**30:.1f} GiB, but {existing} has "
            f"{free / 2**30:.1f} GiB free. Use a smaller scale or a folder on a larger disk.")


def generate_local(folder: Path, scale: float, setting: str = "--scale") -> dict[str, Any]:
    """Write every part in this process (a CPU, or this process's GPU); {"seconds", "bytes", "reused"}."""
    import time

    if ready(folder, scale):
        return {"seconds": 0.0, "bytes": _bytes(folder), "reused": True}
    problem = space_problem(folder, scale, setting)
    if problem:
        raise SystemExit(problem)
    started = time.monotonic()
    (folder / "manifest.json").unlink(missing_ok=True)
    for part in plan(scale):
        write_part(str(folder), part)
    (folder / "manifest.json").write_text(json.dumps(manifest(scale), indent=1) + "\n")
    return {"seconds": round(time.monotonic() - started, 3), "bytes": _bytes(folder), "reused": False}


def _bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.glob("*/*.parquet"))


# --- the queries: each takes the folder and returns a LazyFrame; all results are sorted, so equal means equal ---

def _scan(folder: Path, table: str) -> Any:
    import polars as pl

    return pl.scan_parquet(str(folder / table / "*.parquet"))


def q1(folder: Path) -> Any:
    """Pricing summary: a scan, a filter and an 8-aggregate group-by over 6 groups."""
    import polars as pl

    line = _scan(folder, "lineitem").filter(pl.col("l_shipdate") <= day("1998-09-02"))
    net = pl.col("l_extendedprice") * (100 - pl.col("l_discount"))
    return (line.group_by("l_returnflag", "l_linestatus")
            .agg(pl.col("l_quantity").sum().alias("sum_qty"), pl.col("l_extendedprice").sum().alias("sum_base"),
                 net.sum().alias("sum_disc_price"), (net * (100 + pl.col("l_tax"))).sum().alias("sum_charge"),
                 pl.col("l_quantity").min().alias("min_qty"), pl.col("l_extendedprice").max().alias("max_price"),
                 pl.col("l_discount").sum().alias("sum_disc"), pl.len().alias("count_order"))
            .sort("l_returnflag", "l_linestatus"))


def q3(folder: Path) -> Any:
    """Shipping priority: three tables joined, a group-by over the orders, the top 10."""
    import polars as pl

    cut = day("1995-03-15")
    customer = _scan(folder, "customer").filter(pl.col("c_mktsegment") == 1)
    orders = _scan(folder, "orders").filter(pl.col("o_orderdate") < cut)
    line = _scan(folder, "lineitem").filter(pl.col("l_shipdate") > cut)
    return (customer.join(orders, left_on="c_custkey", right_on="o_custkey")
            .join(line, left_on="o_orderkey", right_on="l_orderkey")
            .group_by("o_orderkey", "o_orderdate")
            .agg((pl.col("l_extendedprice") * (100 - pl.col("l_discount"))).sum().alias("revenue"))
            .sort(["revenue", "o_orderkey"], descending=[True, False]).head(10))


def q6(folder: Path) -> Any:
    """Forecasting revenue change: a scan with a narrow filter and one sum."""
    import polars as pl

    line = _scan(folder, "lineitem").filter(
        pl.col("l_shipdate").is_between(day("1994-01-01"), day("1995-01-01"), closed="left")
        & pl.col("l_discount").is_between(5, 7) & (pl.col("l_quantity") < 24))
    return line.select((pl.col("l_extendedprice") * pl.col("l_discount")).sum().alias("revenue"))


def q10(folder: Path) -> Any:
    """Returned items: four tables joined, a group-by over the customers, the top 20."""
    import polars as pl

    orders = _scan(folder, "orders").filter(
        pl.col("o_orderdate").is_between(day("1993-10-01"), day("1994-01-01"), closed="left"))
    line = _scan(folder, "lineitem").filter(pl.col("l_returnflag") == 2)
    return (_scan(folder, "customer").join(orders, left_on="c_custkey", right_on="o_custkey")
            .join(line, left_on="o_orderkey", right_on="l_orderkey")
            .join(_scan(folder, "nation"), left_on="c_nationkey", right_on="n_nationkey")
            .group_by("c_custkey", "n_name", "c_acctbal")
            .agg((pl.col("l_extendedprice") * (100 - pl.col("l_discount"))).sum().alias("revenue"))
            .sort(["revenue", "c_custkey"], descending=[True, False]).head(20))


def q18(folder: Path) -> Any:
    """Large-volume customers: a group-by over every order (the largest shuffle), a filter, two joins, a sort."""
    import polars as pl

    big = (_scan(folder, "lineitem").group_by("l_orderkey").agg(pl.col("l_quantity").sum().alias("qty"))
           .filter(pl.col("qty") > 250))
    return (big.join(_scan(folder, "orders"), left_on="l_orderkey", right_on="o_orderkey")
            .join(_scan(folder, "customer"), left_on="o_custkey", right_on="c_custkey")
            .select("o_custkey", "l_orderkey", "o_orderdate", "o_totalprice", "qty")
            .sort(["o_totalprice", "l_orderkey"], descending=[True, False]).head(100))


QUERIES: dict[str, Callable[[Path], Any]] = {"q1": q1, "q3": q3, "q6": q6, "q10": q10, "q18": q18}


def selected(names: str) -> Iterator[tuple[str, Callable[[Path], Any]]]:
    """The queries a comma-separated list names ("all": every one); an unknown name fails, naming the known."""
    wanted = list(QUERIES) if names == "all" else [name.strip() for name in names.split(",") if name.strip()]
    unknown = [name for name in wanted if name not in QUERIES]
    if unknown:
        raise ValueError(f"unknown queries {', '.join(unknown)}: choose from {', '.join(QUERIES)} or all")
    for name in wanted:
        yield name, QUERIES[name]

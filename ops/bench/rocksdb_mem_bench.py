"""What RocksDB holds in RAM for N session records, offline (no Kafka, no worker):

    .venv/bin/python ops/bench/rocksdb_mem_bench.py [--keys 100000] [--cache-mb 128]

Four partitions opened as the worker opens them (faust's `RocksDBOptions` with
`rocksdb_options(cache_mb, 4)`), `--keys` keys of 1,400 B each written five times (as
deferred writes write a session once per commit) with a read at random every 7th write;
prints RSS and RocksDB's own figures summed over the partitions: the block cache's
usage (bounded by `--cache-mb`), the memtables, the table readers (index and filter
blocks held outside the cache). docs/performance.md §4.
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
from pathlib import Path

from faust.stores.rocksdb import RocksDBOptions

from loopwatch.streams.kafka.faust_ext.session_table import rocksdb_options

PARTITIONS = 4
PROPERTIES = (
    "block-cache-usage",
    "cur-size-all-mem-tables",
    "estimate-table-readers-mem",
    "total-sst-files-size",
)


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--cache-mb", type=int, default=128)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="lw-rocksdb-mem-"))
    try:
        options = RocksDBOptions(**rocksdb_options(args.cache_mb, PARTITIONS))
        dbs = [options.open(root / f"p{p}") for p in range(PARTITIONS)]
        before = rss_mib()
        choose = random.Random(1)
        for round_ in range(5):
            for n in range(args.keys):
                value = (f"{n:08d}-{round_}-" * 100).encode()[:1400]
                dbs[n % PARTITIONS][f"session-{n:08d}".encode()] = value
                if n % 7 == 0:
                    other = choose.randrange(args.keys)
                    dbs[other % PARTITIONS].get(f"session-{other:08d}".encode())
        figures = {
            name: sum(db.property_int_value("rocksdb." + name) or 0 for db in dbs) / 2**20
            for name in PROPERTIES
        }
        print(
            f"{args.keys:,} keys, cache {args.cache_mb} MiB: RSS {before:.0f} -> "
            f"{rss_mib():.0f} MiB; "
            + ", ".join(f"{name} {mib:.1f} MiB" for name, mib in figures.items())
        )
        for db in dbs:
            db.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()

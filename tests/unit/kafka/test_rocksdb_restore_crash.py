"""A restore that skips the WAL (`streams.kafka.faust_ext.rocksdb_restore`) killed with
SIGKILL part way: a child process restores a changelog into the `rocksdb://` table's store
(both partitions active, small memtables so that some flush during the restore) and kills
itself after a seeded number of batches. Reopened, each partition's database holds exactly
the changelog's records up to the offset it stores (none missing, none past it; nothing
at all without an offset), and never less than what was settled (flushed) or noted by a
logged `set_persisted_offset` before the kill."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests.support.kafka_broker import in_ci

if not in_ci():  # CI installs the rocksdb extra (`make venv`): there a missing one fails
    pytest.importorskip("rocksdict", reason="the rocksdb extra: pip install -e '.[rocksdb]'")

from rocksdict import Options, Rdict

ROOT = Path(__file__).resolve().parents[3]
PARTITIONS = 2
RECORDS = 3000
"""Changelog records per partition."""
OFFSET_KEY = b"__faust\0offset__"
TABLE = "sessions"
CHILD = (
    "import sys; from tests.unit.kafka.test_rocksdb_restore_crash import restore_then_die;"
    " restore_then_die(sys.argv[1], int(sys.argv[2]))"
)

Changelog = list[tuple[int, int, bytes, bytes | None]]
"""(partition, offset, key, value or None: a tombstone), in the order recovery reads them."""


def changelog(seed: int) -> Changelog:
    """The changelog of seed `seed`: both partitions' records interleaved, offsets with
    gaps (compaction), values of 100-600 bytes, one in ten a tombstone."""
    rng = random.Random(seed)
    offsets = [0] * PARTITIONS
    records: Changelog = []
    for _ in range(RECORDS * PARTITIONS):
        partition = rng.randrange(PARTITIONS)
        key = b"session-%d" % rng.randrange(400)
        value = None if rng.random() < 0.1 else rng.randbytes(rng.randrange(100, 600))
        records.append((partition, offsets[partition], key, value))
        offsets[partition] += rng.choice((1, 1, 1, 2, 5))
    return records


def _plan(seed: int) -> tuple[list[int], int, str, int]:
    """Batch sizes, the batch after which the child dies, what it does before (nothing,
    `settle`, or a logged `set_persisted_offset`) and after which batch it does it."""
    rng = random.Random(seed * 7919)
    sizes: list[int] = []
    while sum(sizes) < RECORDS * PARTITIONS:
        sizes.append(rng.randrange(1, 300))
    die_after = rng.randrange(len(sizes) // 4, len(sizes))
    action = ("none", "settle", "set_persisted_offset")[seed % 3]
    # a logged offset is killed at once (a later memtable flush would hide a lost record)
    act_after = die_after if action == "set_persisted_offset" else rng.randrange(1, die_after)
    return sizes, die_after, action, act_after


def restore_then_die(data_dir: str, seed: int) -> None:
    """The child: restore `changelog(seed)` in batches, all partitions active under
    recovery, print what was made durable, and SIGKILL itself (see `_plan`)."""
    import faust  # noqa: PLC0415  (the child's imports)
    from faust.types import TP  # noqa: PLC0415

    from loopwatch.streams.kafka.faust_ext.changelog_hand_off import (  # noqa: PLC0415
        ChangelogRecord,
    )
    from loopwatch.streams.kafka.faust_ext.session_table import SessionTable  # noqa: PLC0415

    app = faust.App(
        "restore-crash",
        store="rocksdb://",
        datadir=data_dir,
        Table=SessionTable,
        key_serializer="raw",
        value_serializer="raw",
    )
    # 64 KiB memtables: a few hundred records each, so some flush during the restore
    options = {"write_buffer_size": 64 * 1024, "max_write_buffer_number": 2}
    table: Any = app.Table(
        TABLE, key_type=bytes, value_type=bytes, partitions=PARTITIONS, options=options
    )
    store = table.data
    assert type(store).__name__ == "RestoringStore"
    topic = table.changelog_topic.get_topic_name()
    tps = [TP(topic, p) for p in range(PARTITIONS)]
    recovery: Any = app.tables.recovery
    recovery.active_tps.update(tps)
    recovery.in_recovery = True

    records = [ChangelogRecord(tps[p], o, k, v) for p, o, k, v in changelog(seed)]
    sizes, die_after, action, act_after = _plan(seed)
    start = 0
    written: dict[int, int] = {}
    for index, size in enumerate(sizes):
        batch = records[start : start + size]
        start += size
        table.apply_changelog_batch(batch)
        for record in batch:
            written[record.partition] = record.offset
        if index == act_after and action != "none":
            if action == "settle":
                store.settle()
            else:  # normal processing notes an offset: a WAL write after unlogged ones
                for p, offset in written.items():
                    store.set_persisted_offset(tps[p], offset)
            print(json.dumps({"durable": written}), flush=True)
        if index == die_after:
            print(json.dumps({"written": written}), flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
    raise AssertionError("the plan kills the child before the changelog ends")


def _stored(data_dir: Path, partition: int) -> tuple[int | None, dict[bytes, bytes]]:
    path = data_dir / "v1" / "tables" / f"{TABLE}-{partition}.db"
    db = Rdict(str(path), options=Options(raw_mode=True))
    try:
        items = dict(db.items())
    finally:
        db.close()
    offset = items.pop(OFFSET_KEY, None)
    return (None if offset is None else int(offset)), items


def _prefix(records: Changelog, partition: int, upto: int | None) -> dict[bytes, bytes]:
    """The store a restore of `partition` up to offset `upto` leaves."""
    state: dict[bytes, bytes] = {}
    for p, offset, key, value in records:
        if p != partition or upto is None or offset > upto:
            continue
        if value is None:
            state.pop(key, None)
        else:
            state[key] = value
    return state


SEEDS = range(9)


def _restore_and_kill(seed: int, data_dir: Path) -> dict[str, dict[int, int]]:
    child = subprocess.run(
        [sys.executable, "-c", CHILD, str(data_dir), str(seed)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    reports: dict[str, dict[int, int]] = {}
    for line in child.stdout.splitlines():
        for name, offsets in json.loads(line).items():
            reports[name] = {int(p): o for p, o in offsets.items()}
    return reports


@pytest.mark.parametrize("seed", SEEDS)
def test_a_killed_restore_leaves_a_changelog_prefix_up_to_its_offset(seed: int) -> None:
    records = changelog(seed)
    with tempfile.TemporaryDirectory() as tmp:
        reports = _restore_and_kill(seed, Path(tmp))
        for partition in range(PARTITIONS):
            offset, items = _stored(Path(tmp), partition)
            assert items == _prefix(records, partition, offset), (partition, offset)
            written = reports["written"].get(partition)
            assert offset is None or (written is not None and offset <= written)
            durable = reports.get("durable", {}).get(partition)
            if durable is not None:
                assert offset is not None and offset >= durable, (partition, offset, durable)


def test_the_restore_skips_the_wal() -> None:
    """Some of what a plain unlogged restore wrote is gone after the kill (with the WAL
    nothing would be), and some of it was flushed (the check above is not on empties)."""
    lost = flushed = 0
    for seed in (s for s in SEEDS if _plan(s)[2] == "none"):
        with tempfile.TemporaryDirectory() as tmp:
            reports = _restore_and_kill(seed, Path(tmp))
            for partition in range(PARTITIONS):
                offset, _ = _stored(Path(tmp), partition)
                lost += offset is None or offset < reports["written"][partition]
                flushed += offset is not None
    assert lost and flushed

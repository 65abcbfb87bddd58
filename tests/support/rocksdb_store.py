"""A `rocksdb://` worker's table on disk, read back as faust's RocksDB store left it.
Import after the `rocksdb` extra's check (`pytest.importorskip("rocksdict")` outside CI)."""

from __future__ import annotations

from pathlib import Path

from rocksdict import AccessType, Options, Rdict

OFFSET_KEY = b"__faust\0offset__"
"""Where faust's RocksDB store keeps a partition's persisted changelog offset."""


def partition_db(data_dir: Path, partition: int, table: str = "sessions") -> Path:
    # faust: <datadir>/v<app version>/tables/<table>-<partition>.db
    return data_dir / "v1" / "tables" / f"{table}-{partition}.db"


def stored(path: Path, *, read_only: bool) -> tuple[int | None, dict[bytes, bytes]]:
    """The partition database at `path`: its persisted offset (None: none) and its records.
    `read_only`: it must exist; otherwise opened as a restarted worker opens it (a partition
    never written is then an empty database)."""
    if read_only:
        assert path.is_dir(), f"no RocksDB at {path}: {sorted(path.parent.rglob('*'))}"
    access = AccessType.read_only() if read_only else AccessType.read_write()
    db = Rdict(str(path), options=Options(raw_mode=True), access_type=access)
    try:
        items = dict(db.items())
    finally:
        db.close()
    offset = items.pop(OFFSET_KEY, None)
    return (None if offset is None else int(offset)), items

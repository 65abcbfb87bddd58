"""The sessions table as the settings make it: standby replicas (LOOPWATCH_STANDBY_REPLICAS)
and RocksDB's memory (LOOPWATCH_ROCKSDB_CACHE_MB shared out over the partitions, small
write buffers) instead of faust's defaults (2 GiB of block cache and 3 x 64 MiB of write
buffers per partition's database)."""

from __future__ import annotations

from faust.stores.rocksdb import RocksDBOptions

from loopwatch.streams.kafka.faust_ext.session_table import (
    ROCKSDB_WRITE_BUFFER_BYTES,
    ROCKSDB_WRITE_BUFFERS,
)
from loopwatch.streams.worker.app import TABLE_NAME, create_app
from tests.stream.settings_for_tests import stream_settings

MIB = 1024 * 1024


async def test_defaults_keep_no_standby_and_bound_rocksdb() -> None:
    app = create_app(stream_settings(partitions=4))
    assert app.conf.table_standby_replicas == 0
    options = RocksDBOptions(**app.tables[TABLE_NAME].options)
    assert options.block_cache_size == 128 * MIB // 4
    assert options.write_buffer_size == ROCKSDB_WRITE_BUFFER_BYTES
    assert options.max_write_buffer_number == ROCKSDB_WRITE_BUFFERS
    per_partition = options.block_cache_size + options.write_buffer_size * ROCKSDB_WRITE_BUFFERS
    assert per_partition * 4 <= 160 * MIB, "the whole table's RocksDB memory stays bounded"


async def test_the_settings_reach_faust() -> None:
    app = create_app(stream_settings(partitions=3, standby_replicas=1, rocksdb_cache_mb=300))
    assert app.conf.table_standby_replicas == 1
    assert app.tables[TABLE_NAME].options["block_cache_size"] == 100 * MIB

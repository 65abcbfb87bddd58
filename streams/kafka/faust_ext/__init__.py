"""The faust wing: every workaround that touches faust, mode or aiokafka internals, and
only those. Each is tested (tests/stream, tests/integration); each depends on the exact
versions pinned in pyproject.toml and in `PINNED` (tests/unit/test_faust_ext_pins.py
fails when the installed versions differ: re-check every item below before moving a pin).

Private APIs touched, by module:

* `offset_guard`, with `offset_order` (never skip an event, never commit past one;
  faust-streaming #216: records fetched before recovery's seek move the read offset;
  #318: `_new_offset` accepts a one-offset gap at the head of the acked offsets):
  - `faust.transport.drivers.aiokafka.Consumer._new_offset`, `._commit_offsets`
    (overridden), `._acked`, `._committed_offset`, `._gap` (read; `_gap[tp].addi` to
    accept offsets gone by retention), `.seek_to_committed` (overridden: aiokafka's
    leaves partitions with no committed offset, or 0, where recovery's early fetch
    left them) and `._seek`;
  - mode `Service.wait_first` (overridden for faust's per-record hand-off, which it
    recognises by `asyncio.Event.wait`'s code object), `Service._stopped`, `._crashed`;
    `Consumer.suspend_flow` replaced by a `FlowEvent`.
* `session_table`: `faust.Table.on_key_set` / `on_key_del` (changelog records through
  the batched outputs), `on_rebalance`, `on_recovery_completed`; the RocksDB store's
  `_db_for_partition` and `_visible_items` (records kept in the store, announced after
  recovery, which does not re-read them); `faust.streams._current_event` (set to a
  stand-in event of one partition by `writing_in`, for the writes made at each offset
  commit, outside of the agent).
* `app`: `App.maybe_start_producer` (skips `@stampede` per send), `App.on_init_dependencies`
  (faust's Monitor replaced by a no-op sensor), `App.transport` set to the guarded one
  (`guard_commits`: the outputs' flush passed to the consumer explicitly),
  `App.producer._ensure_producer()` (aiokafka's producer for batches), `Event.ack`
  (faust-streaming acks messages its stream dropped in `Stream._c_aiter`),
  `Worker.on_setup_root_logger` (no DEBUG root logger for the spinner),
  `App.tables.recovery.completed` and `App.in_recovery` (`worker_ready`, the readiness
  gauge).
* `inline` (the events topic's records handed to the worker as the consumer fetches
  them, without a faust stream): `Conductor._build_handler` (overridden), `App._new_conductor`
  (in `app`), `Consumer.track_message` / `.ack` / `.suspend_flow`,
  `Consumer._wait_next_records` (overridden in `offset_guard`, to count the fetched
  records), `Message.generation_id` / `.tracked`, `App.consumer_generation_id`,
  `App.flow_control`.
* `batch_hand_off` (`LOOPWATCH_BATCH_HAND_OFF`, on by default: the events topic's records handed
  over a fetched batch per partition at a time): `Consumer._drain_messages` (overridden in
  `offset_guard.GuardedConsumer`, faust's loop kept for every other topic),
  `._wait_next_records`, `._read_offset`, `._add_gap`, `._to_message`, `._acked`,
  `._acked_index`, `._committed_offset`, `._n_acked`, `._commit_every`,
  `._unacked_messages`, `._waiting_for_ack`, `._buffered_partitions`, `.perform_seek`,
  `.flow_active`, `.diag`; `App.monitor.track_tp_end_offset` / `.stream_inbound_time`;
  `Conductor.batch_callbacks` (ours, in `inline`).
* `changelog_hand_off` (`LOOPWATCH_CHANGELOG_BATCHES`, on by default: the changelog
  topics' records handed to the table recovery per fetched batch, without faust events):
  `Consumer._wait_next_records` (overridden: the changelog partitions' records taken out
  of each fetch), `._read_offset`, `._buffered_partitions`, `.flow_active`,
  `.suspend_flow`, `.highwater`; `App.tables.changelog_topics`, `App.tables.recovery`
  (`batch_recovery.BatchRecovery.read_fetched`, which clears faust's
  `Recovery.signal_recovery_end` in `_set_recovery_started`), `App.flow_control`,
  `App.consumer_generation_id`, `App.monitor.track_tp_end_offset`; faust's stores'
  `apply_changelog_batch` reads a `ChangelogRecord` as an event (`key`, `value`,
  `message.tp`, `.offset`, `.partition`, `.key`, `.value`).
* `rocksdb_restore` (the `rocksdb://` table's store, set up by `session_table`'s
  `_new_store_by_url`: changelog records and offset in one RocksDB write per partition,
  without the WAL while an active partition is restored): faust's RocksDB `Store` subclassed
  (`apply_changelog_batch`, `set_persisted_offset`, `_set`, `_del`, `on_rebalance`,
  `on_recovery_completed`, `stop` extended), its `offset_key`, `_dbs`, `_db_for_partition`,
  `use_rocksdict`; `Collection._new_store_by_url`; `App.tables.recovery.in_recovery` /
  `.active_tps`; rocksdict 0.3.29's `WriteOptions.disable_wal` (a property, though its stub
  says a method), `Rdict.set_options` (`disable_auto_compactions`), `Rdict.flush`.
* `loop_consumer` (aiokafka's consumer on the worker's event loop, without faust's
  consumer thread): `AIOKafkaConsumerThread` / mode `ServiceThread.start`, `.stop`,
  `._stop_children`, `._stop_futures`, `._stop_exit_stacks`, `._stopped_set`,
  `._thread_started`, `QueueServiceThread.call_thread` / `.cast_thread` (overridden);
  `Consumer._new_consumer_thread` (overridden in `offset_guard`).
* `producer`: aiokafka `AIOKafkaProducer.client._wait_on_metadata`, `._partition`,
  `.client.cluster.partitions_for_topic` (the verdicts topic's count: reply partitions),
  `._partitioner` (a `DefaultPartitioner`: keys placed by `key_partition` instead).
* `fetch_wait` (the worker's fetches wait a few ms while records keep coming): aiokafka
  `AIOKafkaConsumer._fetcher` (its class changed in place after `start`),
  `Fetcher._proc_fetch_request` (overridden), `._fetch_min_bytes`, `._fetch_max_wait_ms`
  (read for each request by `_get_actions_per_node`); `AIOKafkaConsumerThread.on_start`
  (extended in `loop_consumer`).
* `resume_wake` (the fetch loop goes on once a partition is resumed, where faust slept a
  second with none active): `Consumer._wait_next_records` (replaced: faust's body, its
  `sleep(1)` a wait on `resume_partitions` / `_set_active_tps`, both extended),
  `._get_active_partitions`, `._getmany`, `.not_waiting_next_records`, `.can_resume_flow`,
  `.flow_active`; `App.client_only`; mode `Service.wait_first`.

Why each exists, with the figures measured: docs/architecture.md ("The faust wing").
Import the submodules directly (`streams.kafka.faust_ext.app`, ...): this package imports
nothing, so `streams.kafka.outputs` can use `producer` without importing faust.
"""

PINNED = {
    "faust-streaming": "0.15.3",
    "aiokafka": "0.14.0",
    "mode-streaming": "0.7.1",
}
"""The versions every workaround here was written and tested against."""

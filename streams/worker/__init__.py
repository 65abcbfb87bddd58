"""The detection worker: one record's whole way, from the events topic to its verdict.

`app.create_app(settings)` wires it; `loopwatch worker` runs it. One record's way:

1. **Fetch.** aiokafka's consumer runs on the worker's one event loop and thread
   (`kafka.faust_ext.loop_consumer`); the events topic's records are handed over without
   a faust stream, by default (`LOOPWATCH_BATCH_HAND_OFF`) a fetched batch per partition
   at a time (`kafka.faust_ext.batch_hand_off`, `app.handle_batch`: steps 2-5 for each
   record of the batch in offset order, step 6 once for the batch), with it false one at
   a time as the fetch loop yields them (`kafka.faust_ext.inline`).
2. **In order.** `app.handle_fetched` asks `kafka.faust_ext.offset_order.OffsetOrder`
   whether the record is the partition's next offset; one beyond it means faust dropped
   records, and the partition is read again from the first missing offset.
3. **Handle.** `handler.RecordHandler.handle` runs the per-record pipeline
   (`pipeline.process_record`: decode, key and size checks, duplicate check, the
   detector's `observe`, the session's new record, expiry), which never raises: a bad
   record comes back as a dead letter.
4. **State.** The pipeline reads and writes sessions only through a `store.SessionStore`:
   in the worker the faust table's (`table_store.TableSessionStore`), whose writes are
   deferred: `set` and `delete` only note the session's newest record.
5. **Send.** The handler sends the verdict (and its warning, the loop episodes the event
   closed, or the dead letter) through `kafka.batched_outputs.BatchedOutputs`, which
   collects records per partition into one aiokafka batch; metrics are counted
   (`metrics`).
6. **Ack.** The record is acked to faust once handled (per batch: the records handled
   before a rebalance stopped the flow, at once); its offset is now eligible for the next
   commit.

The crash-safe commit, every `LOOPWATCH_COMMIT_INTERVAL_MS` (`app._guard_commits`, run by
the guarded consumer of `kafka.faust_ext.offset_guard` before each offset commit):

1. The offsets to commit are fixed: only acked ones, never past an offset that was not
   acked (`GuardedConsumer`).
2. The sessions' noted records are written to the table, a few dozen per loop turn
   (`TableSessionStore.write_pending_in_turns`); each record lists the verdicts of its
   session still unacknowledged, so a replay can resend them. Their changelog records go
   to the batched outputs.
3. The outputs are flushed: every verdict, warning, episode, dead letter and changelog
   record added before the flush is acknowledged by the broker (`acks=all`).
4. Only then are the offsets committed.

A crash (kill -9) anywhere before step 4 loses only what was noted since the last commit:
those events' offsets were not committed, so they are processed again from the table as
it was at the last commit, and give the same verdicts (a duplicate is identical).
Partitions revoked drop what was noted for them (faust commits before it revokes).

Around that path: `policy_book` and `policy_follower` (per-agent policies, hot-reloaded),
`readiness` (`/healthz`, `/ready`), `lag`, `broker_outage` (one log line per outage),
`log_format` (JSON logs).
"""

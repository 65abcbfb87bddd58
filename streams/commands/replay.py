"""`loopwatch replay FILE...`: publish recorded sessions to a live worker and check that
its verdicts give exactly `loopwatch scan`'s warnings for the same input (docs/scan.md).

Exit codes: 0 every session matched; 1 the broker could not be reached; 2 bad options,
settings or an unreadable file; 6 no event in the input; 7 (`EXIT_MISMATCH`) some
session's live warnings differ from scan's, or its verdicts did not all arrive before
`--deadline` (the table: `loopwatch --help`).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaError
from pydantic_core import from_json

from loopwatch.models import AgentEvent, ConfigError
from loopwatch.streams.commands.detection_options import (
    add_threshold_options,
    detection_config,
    session_ttl,
)
from loopwatch.streams.commands.exit_codes import (
    EXIT_KAFKA,
    EXIT_MISMATCH,
    EXIT_NO_EVENTS,
    EXIT_OK,
    EXIT_USAGE,
)
from loopwatch.streams.commands.options import bootstrap_servers, positive_float
from loopwatch.streams.scan.compare import SessionComparison, compare
from loopwatch.streams.scan.inputs import FORMAT_CHOICES, INPUT_ERRORS
from loopwatch.streams.scan.recorded import read_recorded
from loopwatch.streams.scan.scanner import Scanner
from loopwatch.streams.scan.transcripts import AUTO
from loopwatch.streams.settings import Settings, SettingsError

_NAME = "loopwatch replay"


def register(sub: argparse._SubParsersAction[Any]) -> None:
    parser = sub.add_parser(
        "replay",
        help="publish recorded sessions to a live worker and compare its warnings with scan's",
        description=(
            "Publish the events of recorded sessions (event JSON lines, or transcripts with "
            "--format; .gz accepted) to the events topic of a running worker, each session "
            "in its order, then read the worker's verdicts and print, per session, whether "
            "its live warnings equal `loopwatch scan`'s for the same input (the same rule "
            "at the same seq). Detection options must match the worker's (they default to "
            "the same LOOPWATCH_* settings). Kafka: KAFKA_BOOTSTRAP_SERVERS and the "
            "KAFKA_SECURITY_PROTOCOL/SSL/SASL settings, topic names from LOOPWATCH_*_TOPIC. "
            "Exit codes: 0 all match, 1 broker unreachable, 2 bad options or input, "
            "6 no event in the input, 7 a mismatch or verdicts missing at the deadline."
        ),
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help="recorded input files")
    parser.add_argument(
        "--format",
        choices=FORMAT_CHOICES,
        default=AUTO,
        help="auto (default: told by the input), events or a transcript format, as "
        "`loopwatch scan` takes it",
    )
    parser.add_argument(
        "--rebase",
        action="store_true",
        help="shift every event's ts by one amount so that the newest is now (gaps kept); "
        "by default timestamps are published as recorded",
    )
    parser.add_argument(
        "--rate",
        type=positive_float,
        default=500.0,
        help="events per second to publish (default 500)",
    )
    parser.add_argument(
        "--run-id",
        help="appended to every session id as SESSION@RUN_ID, so that a replay of the same "
        "file is new to the worker (default: a fresh random id; see --keep-ids)",
    )
    parser.add_argument(
        "--keep-ids",
        action="store_true",
        help="publish the recorded session ids unchanged (a second replay of them is then "
        "a duplicate to the worker and gets no verdicts)",
    )
    parser.add_argument(
        "--deadline",
        type=positive_float,
        default=120.0,
        help="seconds to wait for the verdicts after the last event is published (default 120)",
    )
    parser.add_argument(
        "--bootstrap",
        type=bootstrap_servers,
        help="the broker (host:port,...; default KAFKA_BOOTSTRAP_SERVERS)",
    )
    add_threshold_options(parser)
    parser.add_argument(
        "--profile", choices=("seed", "extended"), help="the worker's profile (LOOPWATCH_PROFILE)"
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    try:
        settings = Settings.from_env()
        if args.bootstrap is not None:
            settings = settings.model_copy(update={"bootstrap_servers": args.bootstrap})
        config = detection_config(args, os.environ)
        idle_ttl = session_ttl(os.environ)
    except (SettingsError, ConfigError) as exc:
        print(f"{_NAME}: invalid setting: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        recorded = read_recorded(args.files, args.format)
    except INPUT_ERRORS as exc:
        print(f"{_NAME}: cannot read input: {exc}", file=sys.stderr)
        return EXIT_USAGE
    for skipped in recorded.skipped:
        print(f"{_NAME}: {skipped}", file=sys.stderr)
    if not recorded.events:
        print(f"{_NAME}: no event to replay in {', '.join(args.files)}", file=sys.stderr)
        return EXIT_NO_EVENTS
    run_id = None if args.keep_ids else (args.run_id or uuid.uuid4().hex[:8])
    events = prepared(recorded.events, run_id=run_id, rebase_to=_now() if args.rebase else None)
    scanner = Scanner(config, idle_ttl=idle_ttl)
    expected: dict[tuple[str, int], str | None] = {
        (v.session_id, v.seq): (None if v.warning is None else v.warning.rule)
        for v in scanner.run(events)
    }
    sessions = list(dict.fromkeys(event.session_id for event in events))
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)  # our message says it better
    try:
        live = asyncio.run(_replay(settings, events, expected, args.rate, args.deadline))
    except (KafkaError, OSError) as exc:
        print(
            f"{_NAME}: Kafka at {settings.bootstrap_servers} failed ({type(exc).__name__}: "
            f"{exc}); is the broker up? set --bootstrap or KAFKA_BOOTSTRAP_SERVERS",
            file=sys.stderr,
        )
        return EXIT_KAFKA
    results = compare(expected, live, sessions)
    for result in results:
        print(result.line())
    print(f"{_NAME}: {summary(results, len(events), run_id)}", file=sys.stderr)
    return EXIT_OK if all(r.verdict == "match" for r in results) else EXIT_MISMATCH


def prepared(
    events: Sequence[AgentEvent], *, run_id: str | None, rebase_to: datetime | None
) -> list[AgentEvent]:
    """The events as published: session ids tagged `@run_id`, and with `rebase_to` every
    `ts` shifted by one amount so that the newest is `rebase_to`."""
    shift = None if rebase_to is None else rebase_to - max(e.ts for e in events)
    out = []
    for event in events:
        update: dict[str, Any] = {}
        if run_id is not None:
            update["session_id"] = f"{event.session_id}@{run_id}"
        if shift is not None:
            update["ts"] = event.ts + shift
        out.append(event.model_copy(update=update) if update else event)
    return out


def summary(results: Sequence[SessionComparison], published: int, run_id: str | None) -> str:
    counts = {kind: sum(1 for r in results if r.verdict == kind) for kind in _KINDS}
    live = sum(len(r.live) for r in results)
    expected = sum(len(r.expected) for r in results)
    tag = f" (session ids @{run_id})" if run_id else ""
    return (
        f"{published} events of {len(results)} sessions published{tag}; "
        f"{counts['match']} match, {counts['mismatch']} mismatch, "
        f"{counts['incomplete']} incomplete; {live} warnings live, {expected} in scan"
    )


_KINDS = ("match", "mismatch", "incomplete")


def _now() -> datetime:
    return datetime.now(UTC)


async def _replay(
    settings: Settings,
    events: Sequence[AgentEvent],
    expected: dict[tuple[str, int], str | None],
    rate: float,
    deadline: float,
) -> dict[tuple[str, int], str | None]:
    """Publish `events` at `rate`, then read the verdicts topic (from its end as of before
    the first send) until every verdict of `expected` arrived or `deadline` passed."""
    kwargs = settings.aiokafka_kwargs()
    producer = AIOKafkaProducer(**kwargs, acks="all", linger_ms=5)
    consumer = AIOKafkaConsumer(**kwargs, enable_auto_commit=False)
    await producer.start()
    try:
        await consumer.start()
        try:
            partitions = await producer.partitions_for(settings.verdicts_topic)
            tps = [TopicPartition(settings.verdicts_topic, p) for p in sorted(partitions)]
            consumer.assign(tps)
            for tp, end in (await consumer.end_offsets(tps)).items():
                consumer.seek(tp, end)
            await _publish(producer, settings.events_topic, events, rate)
            return await _collect(consumer, expected, deadline)
        finally:
            await consumer.stop()
    finally:
        await producer.stop()


async def _publish(
    producer: AIOKafkaProducer, topic: str, events: Sequence[AgentEvent], rate: float
) -> None:
    """Each event keyed by its session, in input order (so each session's order holds on
    its partition), paced to `rate`; progress on stderr about once a second."""
    started = time.monotonic()
    shown = started
    for number, event in enumerate(events, start=1):
        wait = started + (number - 1) / rate - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
        await producer.send(topic, event.model_dump_json().encode(), key=event.session_id.encode())
        if time.monotonic() - shown >= 1.0 or number == len(events):
            shown = time.monotonic()
            print(f"{_NAME}: published {number}/{len(events)} events", file=sys.stderr)
    await producer.flush()


async def _collect(
    consumer: AIOKafkaConsumer, expected: dict[tuple[str, int], str | None], deadline: float
) -> dict[tuple[str, int], str | None]:
    live: dict[tuple[str, int], str | None] = {}
    sessions = {session_id for session_id, _ in expected}
    waiting = len(expected)
    end = time.monotonic() + deadline
    print(f"{_NAME}: waiting for {waiting} verdicts (at most {deadline:g} s)", file=sys.stderr)
    while waiting and time.monotonic() < end:
        batches = await consumer.getmany(timeout_ms=500)
        for records in batches.values():
            for record in records:
                if record.key is None or record.key.decode(errors="replace") not in sessions:
                    continue  # another session's verdict
                verdict = from_json(record.value)
                ident = (verdict["session_id"], int(verdict["seq"]))
                if ident in expected and ident not in live:
                    waiting -= 1
                warning = verdict.get("warning")
                live[ident] = None if warning is None else str(warning["rule"])
    return live

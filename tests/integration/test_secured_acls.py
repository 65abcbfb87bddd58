"""Least privilege on the secured broker (`kafka.sh --secure`, ACLs on, only the admin a
super user): each role, granted exactly what `loopwatch acls --apply` grants it, does its
job; a runtime is refused everything else; two tenants under their own prefixes cannot
reach each other; a worker missing a right stops at once with one line naming it."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from loopwatch.streams.client import LoopwatchClient
from loopwatch.streams.client.claim import runtime_group
from loopwatch.streams.demo.conversation import Conversation
from loopwatch.streams.demo.loopers import failing_edit
from loopwatch.streams.fleetview.feed import FeedTopics
from loopwatch.streams.fleetview.server import start_dashboard
from loopwatch.streams.kafka.acls import Names, grants
from tests.integration.secured import (
    REFUSED_WITHIN_SECONDS,
    Deployment,
    consume_as,
    produce_as,
    read_refused,
    write_refused,
)
from tests.integration.worker_harness import WorkerProcess
from tests.support.kafka_broker import SecureBroker
from tests.support.otel_spans import LOOPING, InstrumentedAgent, export_records

pytestmark = pytest.mark.kafka

VERDICT_TIMEOUT = 120.0  # a wait returns on its verdict; this only bounds a broken run
BOARD_TIMEOUT = 60.0


@pytest.fixture(scope="module")
def runtime_only(secure_broker: SecureBroker) -> Iterator[Deployment]:
    """A deployment where only the runtime's rights were granted."""
    deployment = asyncio.run(Deployment.make(secure_broker))
    deployment.grant("runtime")
    yield deployment


async def _looping_session_warned(deployment: Deployment, user: str, session_id: str) -> None:
    async with LoopwatchClient.from_settings(
        deployment.settings(user), verdict_timeout=VERDICT_TIMEOUT
    ) as client:
        session = await client.open_session(session_id)
        outcome = await failing_edit(Conversation(session, "openai"))
        await session.end()
    assert outcome.warned_after == 2
    assert client.stats.warnings["repeated_failed_mutation"] >= 1


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once"])
async def test_worker_runtime_and_dashboard_each_with_only_their_rights(
    secure_broker: SecureBroker, tmp_path: Path, guarantee: str
) -> None:
    """exactly_once: the worker's transactions need its prefixed transactional-id right."""
    deployment = await Deployment.make(
        secure_broker, names=(("LOOPWATCH_PROCESSING_GUARANTEE", guarantee),)
    )
    deployment.grant("worker", "runtime", "dashboard")
    worker = WorkerProcess(deployment.as_user("worker"), tmp_path)
    try:
        await _looping_session_warned(deployment, "runtime", "acl-roles")
    except AssertionError:
        raise AssertionError(worker.log_excerpt()) from None
    finally:
        worker.stop()
    dashboard_settings = deployment.settings("dashboard")
    dashboard = await start_dashboard(
        dashboard_settings,
        FeedTopics(dashboard_settings.warnings_topic, dashboard_settings.episodes_topic),
        host="127.0.0.1",
        port=0,
        since_seconds=3600,
    )
    try:
        deadline = time.monotonic() + BOARD_TIMEOUT
        while dashboard.feed.board.warnings == 0 and time.monotonic() < deadline:
            await asyncio.sleep(0.2)  # polling the board inside a deadline
        assert dashboard.feed.board.warnings >= 1
    finally:
        await dashboard.stop()


@pytest.mark.parametrize("kind", ["sasl", "mtls"])
async def test_the_bridge_reads_spans_and_writes_events_with_only_its_rights(
    secure_broker: SecureBroker, tmp_path: Path, kind: str
) -> None:
    deployment = await Deployment.make(secure_broker, kind)
    deployment.grant("bridge")
    agent = InstrumentedAgent(style="child")
    agent.run("acl-bridge", LOOPING)
    admin = deployment.env.settings()
    bridge_settings = deployment.otel("bridge")
    bridge = WorkerProcess(deployment.as_user("bridge"), tmp_path, command="otel-bridge")
    try:
        records = [(None, value) for value in export_records(agent.spans(), "otlp_proto")]
        await produce_as(admin, bridge_settings.spans_topic, records)
        events = await consume_as(admin, admin.events_topic, until=1)
        assert events, bridge.log_excerpt()
    finally:
        bridge.stop()


@pytest.mark.parametrize("topic", ["warnings", "episodes", "config", "changelog"])
async def test_a_runtime_cannot_read(runtime_only: Deployment, topic: str) -> None:
    settings = runtime_only.settings("runtime")
    name = getattr(settings, f"{topic}_topic")
    assert await read_refused(settings, name, runtime_group(settings.verdicts_topic))


async def test_a_runtime_cannot_write_verdicts(runtime_only: Deployment) -> None:
    settings = runtime_only.settings("runtime")
    assert await write_refused(settings, settings.verdicts_topic)


async def test_a_runtime_reads_its_verdicts_and_writes_its_events(
    runtime_only: Deployment,
) -> None:
    """The control of the refusals above: the same principal, its own rights."""
    settings = runtime_only.settings("runtime")
    assert not await write_refused(settings, settings.events_topic)
    assert not await read_refused(
        settings, settings.verdicts_topic, runtime_group(settings.verdicts_topic)
    )


async def test_two_tenants_are_kept_apart(secure_broker: SecureBroker, tmp_path: Path) -> None:
    tenants = {name: await Deployment.make(secure_broker) for name in ("a", "b")}
    for name, deployment in tenants.items():
        deployment.grant(
            "worker",
            "runtime",
            principals={
                "worker": f"User:tenant-{name}-worker",
                "runtime": f"User:tenant-{name}-runtime",
            },
        )
    workers = [
        WorkerProcess(deployment.as_user(f"tenant-{name}-worker"), tmp_path, name=f"worker-{name}")
        for name, deployment in tenants.items()
    ]
    try:
        await asyncio.gather(
            *(
                _looping_session_warned(deployment, f"tenant-{name}-runtime", f"tenant-{name}")
                for name, deployment in tenants.items()
            )
        )
    except AssertionError:
        raise AssertionError("\n".join(w.log_excerpt() for w in workers)) from None
    finally:
        for worker in workers:
            worker.stop()
    a_runtime = tenants["a"].settings("tenant-a-runtime")
    b_names = tenants["b"].env.settings()
    assert await read_refused(
        a_runtime, b_names.verdicts_topic, runtime_group(a_runtime.verdicts_topic)
    )
    assert await write_refused(a_runtime, b_names.events_topic)
    b_runtime = tenants["b"].settings("tenant-b-runtime")
    a_names = tenants["a"].env.settings()
    assert await read_refused(
        b_runtime, a_names.verdicts_topic, runtime_group(b_runtime.verdicts_topic)
    )
    assert await write_refused(b_runtime, a_names.events_topic)


@pytest.mark.parametrize(
    ("case", "named"),
    [
        ("no right", "has no right on topic {verdicts}"),
        ("READ, not WRITE", "lacks WRITE on topic {verdicts}"),
        ("no group right", "lacks READ on group {group}"),
        ("no transactional-id right", "lacks WRITE on transactional ids {group}-*"),
    ],
)
async def test_a_worker_missing_a_right_stops_in_one_line_within_10_s(
    secure_broker: SecureBroker, tmp_path: Path, case: str, named: str
) -> None:
    """Topic rights are asked of the broker's Metadata; group and transactional-id
    rights of its FindCoordinator (a worker without its transactional-id right would
    otherwise wait on its first transaction for ever under exactly_once)."""
    guarantee = "exactly_once" if "transactional" in case else "at_least_once"
    deployment = await Deployment.make(
        secure_broker, names=(("LOOPWATCH_PROCESSING_GUARANTEE", guarantee),)
    )
    names = deployment.otel("admin")
    verdicts, group = names.base.verdicts_topic, names.base.app_id
    # the worker's rights but one, to a principal of its own here
    # (`dashboard` holds no right on this deployment's names)
    partial = []
    for grant in grants(Names.of(names.base, names), {"worker": "User:dashboard"}, ["worker"]):
        if case == "no group right" and grant.resource == "group" and grant.name == group:
            continue
        if case == "no transactional-id right" and grant.resource == "transactional-id":
            continue
        if grant.name != verdicts or case in ("no group right", "no transactional-id right"):
            partial.append(grant)
        elif case != "no right":
            partial.append(replace(grant, operations=("READ",)))
    await deployment.grant_only(partial)
    worker = WorkerProcess(deployment.as_user("dashboard"), tmp_path)
    try:
        code = worker.proc.wait(timeout=REFUSED_WITHIN_SECONDS)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the worker did not exit within 10 s; log:\n{worker.log_excerpt()}")
    finally:
        worker.stop()
    log = worker.log()
    assert code != 0, log
    expected = named.format(verdicts=verdicts, group=group)
    lines = [line for line in log.splitlines() if expected in line]
    assert len(lines) == 1 and "Traceback" not in log, log
    assert "loopwatch acls" in lines[0]

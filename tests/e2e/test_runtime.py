"""A runtime's view, end to end: events out, verdicts back, warnings in the next prompt."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from loopwatch.streams.client import LoopwatchClient, place_anthropic, place_openai
from loopwatch.streams.demo.builtin import BUILTIN
from loopwatch.streams.demo.conversation import Conversation, Format, warnings_in
from loopwatch.streams.demo.loopers import LoopOutcome, failing_edit, paging_reader, status_batch
from loopwatch.streams.demo.replay import replay
from loopwatch.streams.demo.worker_process import WorkerProcess
from loopwatch.streams.settings import Settings
from tests.support.prompt_rules import check_anthropic, check_openai

pytestmark = pytest.mark.kafka

# Generous: a verdict normally takes milliseconds; a slow CI machine must not fail-open.
VERDICT_TIMEOUT = 30.0


def final_prompt(conv: Conversation) -> list[dict[str, object]]:
    place = place_openai if conv.format == "openai" else place_anthropic
    prompt = place(conv.history, conv.session.warnings_by_message())
    (check_openai if conv.format == "openai" else check_anthropic)(prompt)
    return prompt


@pytest.mark.parametrize(
    ("script", "fmt", "rule", "repeats"),
    [
        (failing_edit, "openai", "repeated_failed_mutation", 2),
        (failing_edit, "anthropic", "repeated_failed_mutation", 2),
        (paging_reader, "anthropic", "repeated_read_range", 2),
        (status_batch, "anthropic", "repeated_batch", 3),
        (status_batch, "openai", "repeated_batch", 3),
    ],
)
async def test_a_looping_agent_finds_the_warning_in_its_next_prompt_and_stops(
    worker: WorkerProcess,
    e2e_settings: Settings,
    script: Callable[[Conversation], Awaitable[LoopOutcome]],
    fmt: Format,
    *,
    rule: str,
    repeats: int,
) -> None:
    async with LoopwatchClient.from_settings(
        e2e_settings, verdict_timeout=VERDICT_TIMEOUT
    ) as client:
        session = await client.open_session(f"looper-{rule}-{fmt}")
        conv = Conversation(session, fmt)
        outcome = await script(conv)
        prompt = final_prompt(conv)
        rules = {placed.warning.rule for placed in (await session.verdicts()).warnings}
        await session.end()
    # the warning reached the prompt right after the repeat that crossed the threshold,
    # and the script then changed approach instead of repeating
    assert outcome.warned_after == repeats
    placed = warnings_in(prompt)
    assert placed and all(text.startswith("[loopwatch] ") for text in placed)
    assert rule in rules
    assert client.stats.timeouts == 0
    assert conv.history[-1]["role"] == "assistant"  # it finished with an answer


async def test_clean_agents_never_get_a_warning(
    worker: WorkerProcess, e2e_settings: Settings
) -> None:
    async with LoopwatchClient.from_settings(
        e2e_settings, verdict_timeout=VERDICT_TIMEOUT
    ) as client:
        for recording in BUILTIN:
            for fmt in ("openai", "anthropic"):
                session = await client.open_session(f"clean-{recording.name}-{fmt}")
                conv = Conversation(session, fmt)
                await replay(conv, recording.turns)
                prompt = final_prompt(conv)
                wait = await session.verdicts()
                assert wait.complete and wait.warnings == ()
                assert warnings_in(prompt) == []
                await session.end()
        stats = client.stats
    assert stats.waits > 10 and stats.timeouts == 0 and not stats.warnings


async def test_the_verdict_wait_returns_as_soon_as_the_verdict_arrives(
    worker: WorkerProcess, e2e_settings: Settings
) -> None:
    async with LoopwatchClient.from_settings(e2e_settings) as client:
        session = await client.open_session("prompt-waiter")
        seq = await session.user("hello", message_index=0)
        wait = await session.verdicts(timeout=120.0)
        # far below the timeout: it returned on the verdict, not on the deadline
        assert wait.complete and wait.through_seq == seq and wait.waited_seconds < 60.0
        # the partitions read do not change per session; sessions only register
        read = client.reader.assigned_partitions
        assert read and read <= set(range(e2e_settings.verdict_partitions))
        assert client.reader.watched_sessions == 1
        timeline = wait.timeline
        assert timeline is not None
        assert timeline.published_at <= timeline.received_at <= timeline.returned_at
        await session.end()
        assert client.reader.assigned_partitions == read
        assert client.reader.watched_sessions == 0


async def test_the_verdict_wait_fails_open_within_its_timeout_without_a_worker(
    e2e_settings: Settings,
) -> None:
    async with LoopwatchClient.from_settings(e2e_settings, log_timeouts=False) as client:
        session = await client.open_session("nobody-listens")
        await session.user("hello", message_index=0)
        await session.assistant("hi")
        wait = await session.verdicts(timeout=0.5)
        assert not wait.complete and wait.warnings == ()
        assert 0.5 <= wait.waited_seconds < 10.0
        assert client.stats.timeouts == 1 and client.stats.published == 2
        await session.end()


async def test_fingerprinted_events_keep_content_home_and_still_detect(
    worker: WorkerProcess, e2e_settings: Settings
) -> None:
    async with LoopwatchClient.from_settings(
        e2e_settings, verdict_timeout=VERDICT_TIMEOUT, local_fingerprints=True
    ) as client:
        session = await client.open_session("private-looper")
        outcome = await failing_edit(Conversation(session, "openai"))
        await session.end()
    assert outcome.warned_after == 2
    assert client.stats.warnings["repeated_failed_mutation"] >= 1

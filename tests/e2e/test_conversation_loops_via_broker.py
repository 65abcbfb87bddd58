"""Class 7 through the real broker and an `extended` worker: a runtime's repeated text
and its `context_condensed` events (contract 1.3) come back as warnings."""

from __future__ import annotations

import pytest

from loopwatch.streams.client import LoopwatchClient
from loopwatch.streams.demo.worker_process import WorkerProcess
from loopwatch.streams.settings import Settings
from tests.e2e.frameworks import VERDICT_TIMEOUT

pytestmark = pytest.mark.kafka


async def test_repeated_text_and_condensations_are_warned(
    extended_worker: WorkerProcess, e2e_settings: Settings
) -> None:
    async with LoopwatchClient.from_settings(
        e2e_settings, verdict_timeout=VERDICT_TIMEOUT
    ) as client:
        talk = await client.session("cv-text", agent_id="talker")
        await talk.user("fix the build")
        for _ in range(3):
            await talk.assistant("I will fix the build now.")
        said = await talk.verdicts()
        squeezed = await client.session("cv-condensed", agent_id="talker")
        await squeezed.user("summarise the repo")
        for _ in range(3):
            await squeezed.condensed()
        condensed = await squeezed.verdicts()
        await talk.end()
        await squeezed.end()

    assert said.complete and condensed.complete
    assert [(p.seq, p.warning.rule, p.warning.count) for p in said.warnings] == [
        (3, "repeated_message", 3)
    ]
    assert "I will fix" not in said.warnings[0].warning.message
    assert [(p.seq, p.warning.rule) for p in condensed.warnings] == [(3, "repeated_condensation")]

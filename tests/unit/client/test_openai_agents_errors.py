"""The OpenAI Agents adapter counts the SDK's default tool-failure output as a failure,
so rule 1 fires on a Responses history from the SDK (pure: no broker, no model)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from agents import default_tool_error_function

from loopwatch.models import DetectionConfig
from loopwatch.streams.client import as_agent_events, history_events
from loopwatch.streams.client.openai_agents import sdk_tool_error
from loopwatch.streams.scan.scanner import Scanner

# What the SDK itself gives the model when a tool raises (asked, not copied).
FAILED = default_tool_error_function(None, ValueError("no match"))  # type: ignore[arg-type]


def failing_edit(n: int) -> list[dict[str, Any]]:
    arguments = '{"path": "a.py", "old": "x", "new": "y"}'
    return [
        {"type": "function_call", "call_id": f"f{n}", "name": "edit_file", "arguments": arguments},
        {"type": "function_call_output", "call_id": f"f{n}", "output": FAILED},
    ]


def rules_fired(history: list[dict[str, Any]], tool_error: Any) -> list[str]:
    converted = history_events(history, "responses", tool_error)
    events = as_agent_events(converted, session_id="s", started=datetime(2026, 12, 2, tzinfo=UTC))
    verdicts = Scanner(DetectionConfig()).run(events)
    return [v.warning.rule for v in verdicts if v.warning is not None]


def test_the_sdks_failure_text_is_a_failure_and_other_outputs_are_not() -> None:
    assert sdk_tool_error({"type": "function_call_output", "output": FAILED}) == FAILED
    assert sdk_tool_error({"type": "function_call_output", "output": "done"}) is None


def test_the_same_edit_failing_twice_fires_rule_1_with_the_sdks_defaults() -> None:
    history = [{"role": "user", "content": "fix it"}, *failing_edit(0), *failing_edit(1)]
    assert rules_fired(history, sdk_tool_error) == ["repeated_failed_mutation"]
    assert "repeated_failed_mutation" not in rules_fired(history, None)  # as it was

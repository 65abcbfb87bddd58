"""Claude Agent SDK: the hook callables driven with the SDK's documented hook inputs
(a full run needs the Claude Code CLI and an API key), against the real broker and
worker, as Claude Code would call them in a loop."""

from __future__ import annotations

from typing import Any

import pytest
from claude_agent_sdk import ClaudeAgentOptions, HookContext
from claude_agent_sdk.types import PostToolUseFailureHookInput, PostToolUseHookInput

from loopwatch.models import LoopWarning
from loopwatch.streams.client import MARKER, LoopwatchClient
from loopwatch.streams.client.claude_agent import LoopwatchHooks, contract_call
from loopwatch.streams.client.escalation import StopOnLoop
from loopwatch.streams.demo.worker_process import WorkerProcess
from loopwatch.streams.settings import Settings
from tests.e2e.frameworks import LOOP_STEPS, STOP_STEPS, VERDICT_TIMEOUT, first_stop_advised

pytestmark = pytest.mark.kafka

CONTEXT: HookContext = {"signal": None}


def base(session: str) -> dict[str, Any]:
    return {"session_id": session, "transcript_path": "/tmp/t.jsonl", "cwd": "/repo"}


def ran(session: str, step: int, command: str) -> PostToolUseHookInput:
    return {
        **base(session),  # type: ignore[typeddict-item]
        "hook_event_name": "PostToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": command},
        "tool_response": {"stdout": "", "stderr": "", "interrupted": False},
        "tool_use_id": f"toolu_{step}",
    }


def failed_edit(session: str, step: int) -> PostToolUseFailureHookInput:
    return {
        **base(session),  # type: ignore[typeddict-item]
        "hook_event_name": "PostToolUseFailure",
        "tool_name": "Edit",
        "tool_input": {"file_path": "/repo/a.py", "old_string": "x", "new_string": "y"},
        "tool_use_id": f"toolu_e{step}",
        "error": "String to replace not found in file.",
    }


async def test_hooks_return_the_warning_as_additional_context_and_nothing_when_clean(
    worker: WorkerProcess, e2e_settings: Settings
) -> None:
    async with LoopwatchClient.from_settings(
        e2e_settings, verdict_timeout=VERDICT_TIMEOUT
    ) as client:
        hooks = LoopwatchHooks(client)
        options = ClaudeAgentOptions(hooks=hooks.hooks())  # what a user passes
        assert set(options.hooks or {}) == {"UserPromptSubmit", "PostToolUse", "PostToolUseFailure"}
        prompt = {**base("cl-loop"), "hook_event_name": "UserPromptSubmit", "prompt": "go"}
        assert await hooks.user_prompt_submit(prompt, None, CONTEXT) == {}  # type: ignore[arg-type]
        looping = [
            await hooks.post_tool_use(ran("cl-loop", n, "ls src"), f"toolu_{n}", CONTEXT)
            for n in range(LOOP_STEPS)
        ]
        failing = [
            await hooks.post_tool_use_failure(failed_edit("cl-fail", n), None, CONTEXT)
            for n in range(2)
        ]
        clean = [
            await hooks.post_tool_use(ran("cl-clean", n, f"ls dir{n}"), None, CONTEXT)
            for n in range(LOOP_STEPS)
        ]
        for session in ("cl-loop", "cl-fail", "cl-clean"):
            await hooks.end(session)

    assert looping[:-1] == [{}] * (LOOP_STEPS - 1)
    output: Any = looping[-1]["hookSpecificOutput"]  # type: ignore[typeddict-item]
    assert output["hookEventName"] == "PostToolUse"
    assert output["additionalContext"].startswith(MARKER)
    assert "repeated_result" in output["additionalContext"]
    assert set(output) == {"hookEventName", "additionalContext"}  # the result is unchanged
    failure: Any = failing[-1]["hookSpecificOutput"]  # type: ignore[typeddict-item]
    assert failing[0] == {} and "repeated_failed_mutation" in failure["additionalContext"]
    assert clean == [{}] * LOOP_STEPS


def test_claude_code_tool_names_map_to_the_contract() -> None:
    assert contract_call("Read", {"file_path": "a.py", "offset": 10}) == (
        "read_file",
        {"path": "a.py", "offset": 10},
    )
    assert contract_call("Bash", {"command": "ls"})[0] == "bash"
    assert contract_call("mcp__fs__write_file", {})[0] == "mcp__fs__write_file"


async def run_long_loop(
    client: LoopwatchClient, session: str, stop_on_loop: StopOnLoop
) -> list[Any]:
    """The hooks' answers to the same `ls src` STOP_STEPS times (Claude Code stops the run
    at an answer with `continue: false`; here every hook is called, to see them all)."""
    hooks = LoopwatchHooks(client, stop_on_loop=stop_on_loop)
    prompt = {**base(session), "hook_event_name": "UserPromptSubmit", "prompt": "go"}
    await hooks.user_prompt_submit(prompt, None, CONTEXT)  # type: ignore[arg-type]
    answers = [
        await hooks.post_tool_use(ran(session, n, "ls src"), f"toolu_{n}", CONTEXT)
        for n in range(STOP_STEPS)
    ]
    await hooks.end(session)
    return answers


async def test_stop_on_loop_answers_continue_false_at_stop_advised_only_when_opted_in(
    extended_worker: WorkerProcess, e2e_settings: Settings
) -> None:
    called: list[LoopWarning] = []
    async with LoopwatchClient.from_settings(
        e2e_settings, verdict_timeout=VERDICT_TIMEOUT
    ) as client:
        plain = await run_long_loop(client, "cl-stop-off", False)
        stopping = await run_long_loop(client, "cl-stop-on", True)
        recorded = await run_long_loop(client, "cl-stop-cb", called.append)

    advised = first_stop_advised(plain)  # the hook whose context advises stopping
    assert not any("continue_" in answer for answer in plain + recorded)
    stops = [i for i, answer in enumerate(stopping) if answer.get("continue_") is False]
    assert stops and stops[0] == advised
    reason: Any = stopping[advised]
    assert "stop advised" in reason["stopReason"] and "repeated_result" in reason["stopReason"]
    assert reason["hookSpecificOutput"]["additionalContext"].startswith(MARKER)  # still placed
    assert called and {(w.rule, w.level) for w in called} == {("repeated_result", 3)}

"""Claude Agent SDK: the hook callables driven with the SDK's documented hook inputs
(a full run needs the Claude Code CLI and an API key), against the real broker and
worker, as Claude Code would call them in a loop."""

from __future__ import annotations

from typing import Any

import pytest
from claude_agent_sdk import ClaudeAgentOptions, HookContext
from claude_agent_sdk.types import PostToolUseFailureHookInput, PostToolUseHookInput

from loopwatch.streams.client import MARKER, LoopwatchClient
from loopwatch.streams.client.claude_agent import LoopwatchHooks, contract_call
from loopwatch.streams.demo.worker_process import WorkerProcess
from loopwatch.streams.settings import Settings
from tests.e2e.frameworks import LOOP_STEPS, VERDICT_TIMEOUT

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

"""Claude Agent SDK (`claude-agent-sdk`): hooks that publish each tool call and its
result and hand loopwatch warnings back as `additionalContext`
(`pip install 'loopwatch[claude-agent-sdk]'`).

    hooks = LoopwatchHooks(client)
    options = ClaudeAgentOptions(hooks=hooks.hooks())

The SDK owns the history, so these hooks publish events instead of reading a history:
`UserPromptSubmit` a `user_message` (a boundary), `PostToolUse` and `PostToolUseFailure`
one `assistant_message` with the call and its `tool_result` (the failure's `error` makes
it failed; docs/contract.md §2). The hook then waits for the verdicts (fail-open) and
returns each new warning as `additionalContext`, which Claude Code adds to what the
model reads next; the tool result itself is never changed. The session is the SDK's
`session_id`; the agent id is the hook's `agent_type` (a subagent's) or `claude-code`,
unless `agent_id` says otherwise. Nothing raises into Claude Code for loopwatch's sake:
an error of its own is logged and the hook returns nothing. Only with
`stop_on_loop=True` (opt-in) does a warning of level 3, "stop advised" (docs/contract.md
§9.13), make the hook answer `continue: false` with the reason as `stopReason`.

Claude Code's own tool names are mapped to the contract's (`Bash` → `bash`, `Edit` and
`MultiEdit` → `edit_file`, `Write` → `write_file`, `Read` → `read_file` with `file_path`
as `path`), so the seed rules know which tools mutate and which read. Parallel calls of
one model turn arrive one hook at a time and are published as separate steps.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from claude_agent_sdk import HookContext, HookMatcher
from claude_agent_sdk.types import HookEvent, HookInput, HookJSONOutput

from loopwatch.streams.client.client import LoopwatchClient
from loopwatch.streams.client.encoding import Call
from loopwatch.streams.client.escalation import LoopStopAdvised, LoopStopper, StopOnLoop
from loopwatch.streams.client.placement import warning_text
from loopwatch.streams.client.session import Session

log = logging.getLogger(__name__)

DEFAULT_AGENT_ID = "claude-code"
"""The agent id of the main agent's sessions (a subagent's is its `agent_type`)."""

Hook = Callable[..., Awaitable[HookJSONOutput]]


def _fail_open(hook: Hook) -> Hook:
    @functools.wraps(hook)
    async def guarded(*args: Any, **kwargs: Any) -> HookJSONOutput:
        try:
            return await hook(*args, **kwargs)
        except Exception as exc:  # fail-open: loopwatch never breaks the agent
            log.warning("LoopwatchHooks: %s; hook returns nothing", type(exc).__name__)
            return {}

    return guarded


CLAUDE_TOOL_NAMES: Mapping[str, str] = {
    "Bash": "bash",
    "Edit": "edit_file",
    "MultiEdit": "edit_file",
    "Write": "write_file",
    "Read": "read_file",
}
"""Claude Code tool names and the contract's names for them (docs/contract.md §4)."""


def contract_call(tool_name: str, tool_input: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """A Claude Code tool call with the contract's tool name and read arguments."""
    name = CLAUDE_TOOL_NAMES.get(tool_name, tool_name)
    arguments = dict(tool_input)
    if name == "read_file" and "file_path" in arguments:
        arguments["path"] = arguments.pop("file_path")
    return name, arguments


class LoopwatchHooks:
    """The hook callables for `ClaudeAgentOptions(hooks=...)`; one per process."""

    def __init__(
        self,
        client: LoopwatchClient,
        *,
        agent_id: str | None = None,
        stop_on_loop: StopOnLoop = False,
    ) -> None:
        """`stop_on_loop`: at a warning of level 3 (stop advised), True makes the hook
        answer `continue: false` with the reason (Claude Code stops the run), a callable
        is called with the warning instead; False (default): warnings only."""
        self.client = client
        self.agent_id = agent_id
        self._stopper = LoopStopper(stop_on_loop)
        self._given: dict[str, set[int]] = {}  # session -> seqs of warnings handed out

    def hooks(self) -> dict[HookEvent, list[HookMatcher]]:
        """What `ClaudeAgentOptions(hooks=...)` takes."""
        return {
            "UserPromptSubmit": [HookMatcher(hooks=[self.user_prompt_submit])],
            "PostToolUse": [HookMatcher(hooks=[self.post_tool_use])],
            "PostToolUseFailure": [HookMatcher(hooks=[self.post_tool_use_failure])],
        }

    @_fail_open
    async def user_prompt_submit(
        self, hook_input: HookInput, tool_use_id: str | None, context: HookContext
    ) -> HookJSONOutput:
        session = await self._session(hook_input)
        await session.user()  # the prompt's text stays in the runtime
        return {}

    @_fail_open
    async def post_tool_use(
        self, hook_input: HookInput, tool_use_id: str | None, context: HookContext
    ) -> HookJSONOutput:
        data: Mapping[str, Any] = hook_input
        return await self._step(hook_input, data.get("tool_response"), None, "PostToolUse")

    @_fail_open
    async def post_tool_use_failure(
        self, hook_input: HookInput, tool_use_id: str | None, context: HookContext
    ) -> HookJSONOutput:
        data: Mapping[str, Any] = hook_input
        error = str(data.get("error") or "")
        return await self._step(hook_input, None, error, "PostToolUseFailure")

    async def _step(
        self, hook_input: HookInput, result: Any, error: str | None, event: str
    ) -> HookJSONOutput:
        data: Mapping[str, Any] = hook_input
        session = await self._session(hook_input)
        name, arguments = contract_call(data["tool_name"], data.get("tool_input") or {})
        call = Call(data["tool_use_id"], name, arguments)
        await session.assistant(None, [call])
        await session.tool_result(call.id, name, result, error)
        wait = await session.verdicts()
        advised = self._stopper.advised(session.session_id, wait.warnings)
        given = self._given.setdefault(session.session_id, set())
        texts = []
        for placed in wait.warnings:
            if placed.seq not in given:
                given.add(placed.seq)
                texts.append(warning_text(placed.warning.message))
        answer: Any = {}
        if texts:
            output: Any = {"hookEventName": event, "additionalContext": "\n".join(texts)}
            answer["hookSpecificOutput"] = output
        if advised is not None:
            if callable(self._stopper.option):
                self._stopper.option(advised)
            else:  # Claude Code's own way to end a run from a hook, with the reason
                answer["continue_"] = False
                answer["stopReason"] = str(LoopStopAdvised(advised))
        stop: HookJSONOutput = answer
        return stop

    async def _session(self, hook_input: HookInput) -> Session:
        data: Mapping[str, Any] = hook_input
        agent_id = self.agent_id or data.get("agent_type") or DEFAULT_AGENT_ID
        return await self.client.session(hook_input["session_id"], agent_id=agent_id)

    async def end(self, session_id: str) -> None:
        """Publish `session_end` (e.g. from a `Stop` hook or when the client closes)."""
        self._given.pop(session_id, None)
        self._stopper.forget(session_id)
        await self.client.end_session(session_id)

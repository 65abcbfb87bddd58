"""A simulated agent's conversation: its history in one API's message format, published
and turned into prompts by the public `HistoryTracker` (docs/contract.md §6), as a real
runtime would use it around its model call. The demo's agents and the end-to-end tests
drive it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from loopwatch.streams.client import MARKER, Call, HistoryTracker, PlacedWarning, Session

Format = Literal["openai", "anthropic"]


@dataclass(frozen=True)
class Outcome:
    """What a tool returned for one call."""

    call: Call
    result: Any = None
    error: str | None = None


OnPlaced = Callable[["Conversation", PlacedWarning], None]


class Conversation:
    """History in OpenAI Chat or Anthropic Messages form, published as it grows."""

    def __init__(self, session: Session, fmt: Format, on_placed: OnPlaced | None = None) -> None:
        self.session = session
        self.format: Format = fmt
        self.history: list[dict[str, Any]] = []
        self.system_prompt: str | None = None  # Anthropic: top-level, not a message
        self._on_placed = on_placed
        self._reported: set[int] = set()  # seqs of warnings already reported as placed
        # Chat `tool` messages have no error flag: the demo knows which calls failed.
        self._errors: dict[str, str] = {}
        self.tracker = HistoryTracker(session, fmt, tool_error=self._tool_error)

    async def system(self, text: str) -> None:
        if self.format == "anthropic":
            self.system_prompt = text
        else:
            self.history.append({"role": "system", "content": text})
        await self._publish()

    async def user(self, text: str) -> None:
        self.history.append({"role": "user", "content": text})
        await self._publish()

    async def assistant(self, text: str | None, calls: Sequence[Call] = ()) -> None:
        if self.format == "openai":
            message: dict[str, Any] = {"role": "assistant", "content": text}
            if calls:
                message["tool_calls"] = [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
                    }
                    for c in calls
                ]
        else:
            blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
            blocks += [
                {"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments}
                for c in calls
            ]
            message = {"role": "assistant", "content": blocks}
        self.history.append(message)
        await self._publish()

    async def results(self, outcomes: Sequence[Outcome]) -> None:
        """The results of one tool step, in call order."""
        for outcome in outcomes:
            if outcome.error is not None:
                self._errors[outcome.call.id] = outcome.error
        if self.format == "anthropic":  # one user turn carries every result of the step
            blocks = [
                {
                    "type": "tool_result",
                    "tool_use_id": o.call.id,
                    "content": _text_of(o),
                    **({"is_error": True} if o.error is not None else {}),
                }
                for o in outcomes
            ]
            self.history.append({"role": "user", "content": blocks})
        else:
            self.history.extend(
                {"role": "tool", "tool_call_id": o.call.id, "content": _text_of(o)}
                for o in outcomes
            )
        await self._publish()

    async def prompt(self) -> list[dict[str, Any]]:
        """Wait for the verdict of the newest event (fail-open), then build the prompt."""
        prompt = await self.tracker.prompt(self.history, system=self.system_prompt)
        wait = self.tracker.last_wait
        if self._on_placed is not None and wait is not None:
            for warning in wait.warnings:
                if warning.seq not in self._reported and warning.message_index is not None:
                    self._reported.add(warning.seq)
                    self._on_placed(self, warning)
        return prompt

    async def _publish(self) -> None:
        await self.tracker.publish(self.history, system=self.system_prompt)

    def _tool_error(self, result: Mapping[str, Any]) -> str | None:
        call_id = result.get("tool_call_id", result.get("tool_use_id"))
        return self._errors.get(call_id) if isinstance(call_id, str) else None


def warnings_in(prompt: Sequence[dict[str, Any]]) -> list[str]:
    """The loopwatch warnings a prompt carries, in order (what a model would read)."""
    found = []
    for message in prompt:
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for block in blocks or []:
            text = block.get("text") if isinstance(block, dict) else None
            if block.get("type") == "text" and isinstance(text, str) and text.startswith(MARKER):
                found.append(text)
    return found


def _text_of(outcome: Outcome) -> str:
    if outcome.error is not None:
        return outcome.error
    if isinstance(outcome.result, str):
        return outcome.result
    return json.dumps(outcome.result)

"""A simulated agent's conversation: its history in one API's message format, the events
it publishes, and the prompt it would send (history + placed warnings, SPEC §6).

This is what a real runtime does around its model call; the demo's agents and the
end-to-end tests drive it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from streams.client import MARKER, Call, PlacedWarning, Session, place_anthropic, place_openai

Format = Literal["openai", "anthropic"]


@dataclass(frozen=True)
class Outcome:
    """What a tool returned for one call."""

    call: Call
    result: Any = None
    error: str | None = None


OnPlaced = Callable[["Conversation", PlacedWarning], None]


class Conversation:
    """History in OpenAI Chat or Anthropic Messages form, published event by event."""

    def __init__(self, session: Session, fmt: Format, on_placed: OnPlaced | None = None) -> None:
        self.session = session
        self.format: Format = fmt
        self.history: list[dict[str, Any]] = []
        self.system_prompt: str | None = None  # Anthropic: top-level, not a message
        self._on_placed = on_placed
        self._reported: set[int] = set()  # seqs of warnings already reported as placed

    async def system(self, text: str) -> None:
        if self.format == "anthropic":
            self.system_prompt = text
            await self.session.system(text)
        else:
            await self.session.system(text, message_index=self._append("system", text))

    async def user(self, text: str) -> None:
        await self.session.user(text, message_index=self._append("user", text))

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
        await self.session.assistant(text, calls, message_index=len(self.history) - 1)

    async def results(self, outcomes: Sequence[Outcome]) -> None:
        """The results of one tool step, in call order."""
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
        for outcome in outcomes:
            if self.format == "openai":
                self.history.append(
                    {"role": "tool", "tool_call_id": outcome.call.id, "content": _text_of(outcome)}
                )
            await self.session.tool_result(
                outcome.call.id,
                outcome.call.name,
                outcome.result,
                outcome.error,
                message_index=len(self.history) - 1,
            )

    async def prompt(self) -> list[dict[str, Any]]:
        """Wait for the verdict of the newest event (fail-open), then build the prompt."""
        wait = await self.session.verdicts()
        placed = self.session.warnings_by_message()
        place = place_openai if self.format == "openai" else place_anthropic
        prompt = place(self.history, placed)
        if self._on_placed is not None:
            for warning in wait.warnings:
                if warning.seq not in self._reported and warning.message_index is not None:
                    self._reported.add(warning.seq)
                    self._on_placed(self, warning)
        return prompt

    def _append(self, role: str, text: str) -> int:
        self.history.append({"role": role, "content": text})
        return len(self.history) - 1


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

"""`HistoryTracker`: from "the history I am about to send" to a prompt with warnings.

One call before each model call:

    tracker = await client.tracker("session-42", "openai")
    prompt = await tracker.prompt(messages)      # publish what is new, wait, place

It publishes only the messages it has not published yet, so calling it again with the
same or a longer history is idempotent. Each message gets a number when first seen, and
warnings are anchored to numbers, not list positions: when the runtime trims or
summarises old messages, the messages still present are recognised by their content
(a digest), keep their numbers, and are not published again; warnings of messages that
were trimmed away are no longer placed. Messages that appear in front of the known ones
(a summary replacing trimmed turns) are not new turns and are not published.

Cost: a message is digested (SHA-256 of its JSON) once; a message object passed again
(the runtime's history list grows by appending) reuses its digest, looked up by identity,
so a call costs one dictionary lookup per message it was given before. Runtimes and
adapters that build new message objects each call pay one digest per message per call.
The state kept is one (number, digest, message) entry per message of the latest history
(the objects are the runtime's own, alive in its history anyway).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from loopwatch.streams.client.history import Format, HistoryEvent, HistoryReader, ToolError
from loopwatch.streams.client.ledger import warnings_by_message
from loopwatch.streams.client.placement import (
    WarningsByMessage,
    place_anthropic,
    place_bedrock,
    place_gemini,
    place_openai,
    place_responses,
)
from loopwatch.streams.client.session import Session, VerdictWait

log = logging.getLogger(__name__)

Message = Mapping[str, Any]
Place = Callable[[Sequence[Message], WarningsByMessage], list[dict[str, Any]]]
_PLACE: dict[str, Place] = {
    "openai": place_openai,
    "anthropic": place_anthropic,
    "responses": place_responses,
    "gemini": place_gemini,
    "bedrock": place_bedrock,
}


class HistoryTracker:
    """Publishes one session's history incrementally and places its warnings."""

    def __init__(
        self,
        session: Session,
        fmt: Format,
        *,
        tool_error: ToolError | None = None,
        timeout: float | None = None,
    ) -> None:
        """`tool_error`: tells a failed tool result from a good one (default: Anthropic's
        `is_error`; Chat and Responses have no such flag). `timeout`: the verdict wait
        (default: the client's)."""
        self.session = session
        self.format: Format = fmt
        self._reader = HistoryReader(fmt, tool_error)
        self._timeout = timeout
        self._window: list[tuple[int, str]] = []  # (number, digest) of the last history
        # id(message) -> (message, digest) for the last history; holding the message keeps
        # its id from being reused by another object
        self._digests: dict[int, tuple[Message, str]] = {}
        self._next_number = 0
        self._system_digest: str | None = None
        self.last_wait: VerdictWait | None = None
        """The outcome of the latest verdict wait (which warnings, complete or timed out)."""

    async def publish(self, messages: Sequence[Message], *, system: str | None = None) -> None:
        """Publish the messages not published yet, without waiting for verdicts.

        `system`: Anthropic's top-level system prompt, published when it first appears
        or changes."""
        await self._publish_new(messages, system)

    async def warnings(
        self, messages: Sequence[Message], *, system: str | None = None
    ) -> dict[int, list[str]]:
        """Publish the new messages, wait for their verdicts (fail-open), and return the
        warning texts keyed by index in `messages` (what `placement` takes)."""
        numbers = await self._publish_new(messages, system)
        wait = await self.session.verdicts(timeout=self._timeout)
        self.last_wait = wait
        # message numbers to indexes in `messages`; a trimmed message's warning is left out
        index_of = {number: index for index, number in enumerate(numbers)}
        return warnings_by_message(wait.warnings, index_of.get)

    async def prompt(
        self, messages: Sequence[Message], *, system: str | None = None
    ) -> list[dict[str, Any]]:
        """`warnings()`, then the history with them placed (a new list; `messages` and
        the stored history are untouched)."""
        placed: WarningsByMessage = await self.warnings(messages, system=system)
        return _PLACE[self.format](messages, placed)

    async def _publish_new(self, messages: Sequence[Message], system: str | None) -> list[int]:
        """Publish what is new; the numbers of the messages of this history."""
        numbers, first_new = self._align(self._digests_of(messages))
        if system is not None and _digest(system) != self._system_digest:
            self._system_digest = _digest(system)
            await self.session.system(system)
        for event in self._reader.events(messages, first_new):
            await self._publish(event, numbers[event.message_index])
        return numbers

    def _digests_of(self, messages: Sequence[Message]) -> list[str]:
        known = self._digests
        digests: list[str] = []
        for message in messages:
            hit = known.get(id(message))
            digests.append(hit[1] if hit is not None and hit[0] is message else _digest(message))
        self._digests = {
            id(message): (message, digest)
            for message, digest in zip(messages, digests, strict=True)
        }
        return digests

    def _align(self, digests: list[str]) -> tuple[list[int], int]:
        """Numbers for the messages of this history, and the index of the first new one."""
        known = [digest for _, digest in self._window]
        if digests[: len(known)] == known:
            start, numbers, first_new = 0, [n for n, _ in self._window], len(known)
        elif known[: len(digests)] == digests:  # cut back (e.g. a retried turn)
            start, numbers, first_new = (
                0,
                [n for n, _ in self._window[: len(digests)]],
                len(digests),
            )
        else:
            start, numbers, first_new = self._realign(known, digests)
        numbers = [*self._fresh(start), *numbers]
        numbers += self._fresh(len(digests) - len(numbers))
        self._window = list(zip(numbers, digests, strict=True))
        return numbers, first_new

    def _realign(self, known: list[str], digests: list[str]) -> tuple[int, list[int], int]:
        """The history was trimmed or rewritten: find the longest tail of the known
        messages in it. Returns (unknown leading messages, their numbers, first new)."""
        for drop in range(1, len(known)):
            tail = known[drop:]
            for at in range(len(digests) - len(tail) + 1):
                if digests[at : at + len(tail)] == tail:
                    numbers = [n for n, _ in self._window[drop:]]
                    return at, numbers, at + len(tail)
        log.warning(
            "session %s: the history shares no message with the previous one; "
            "taking it as already published",
            self.session.session_id,
        )
        return len(digests), [], len(digests)

    def _fresh(self, count: int) -> list[int]:
        numbers = list(range(self._next_number, self._next_number + count))
        self._next_number += count
        return numbers

    async def _publish(self, event: HistoryEvent, number: int) -> None:
        session = self.session
        if event.kind == "user_message":
            await session.user(event.text, message_index=number)
        elif event.kind == "system_message":
            await session.system(event.text, message_index=number)
        elif event.kind == "assistant_message":
            await session.assistant(event.text, event.calls, message_index=number)
        else:
            await session.tool_result(
                event.call_id or "",
                event.tool_name or "unknown",
                event.result,
                event.error,
                message_index=number,
            )


def _digest(message: Any) -> str:
    encoded = json.dumps(message, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(encoded.encode("utf-8", "surrogatepass")).hexdigest()

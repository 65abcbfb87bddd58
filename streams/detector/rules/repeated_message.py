"""Rule 10, repeated_message (docs/contract.md §9.14; `extended`): the assistant sending the
same text message again and again with no tool call between, a loop of the conversation
that no tool rule sees (one peer's "monologue" check).

Its own tracker (`"messages"`): the digest of the newest text step's text and how many
text steps in a row had it. A tool step or a user message (new intent) ends the run; a
system message, tool results and condensations do not. A text step whose text the event
does not carry (no `text`, no `text_fingerprint`) equals nothing and ends the run. Only
the digest is kept, never the text.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from loopwatch.models import AssistantMessage, DetectionConfig, text_fingerprint
from loopwatch.models.fingerprints import normalise_text
from loopwatch.streams.detector.rules.base import Hit, Rule, Tracker
from loopwatch.streams.detector.tools import fingerprint_digest

MessageRun = tuple[str, int]
"""(digest of the newest text step's text, "" when unknown or after a tool step; the
run's length)."""
_EMPTY: MessageRun = ("", 0)


def text_digest(event: AssistantMessage) -> str:
    """The digest of a text step's text (§9.14), "" when the event carries neither:
    `fingerprint_digest(text_fingerprint(text))`, computed with less overhead (it runs
    at every text step of an `extended` session; docs/rules.md, the cost)."""
    if event.text_fingerprint is not None:
        return fingerprint_digest(event.text_fingerprint)
    text = event.text
    if text is None:
        return ""
    try:
        encoded = orjson.dumps({"text": normalise_text(text)})  # byte for byte §3's JSON for a str
    except TypeError:  # a lone surrogate: §3's encoder gives the answer (or the error)
        return fingerprint_digest(text_fingerprint(text))
    return hashlib.sha256(encoded).hexdigest()[:32]


class MessageRunTracker(Tracker[MessageRun]):
    key = "messages"

    def empty(self) -> MessageRun:
        return _EMPTY

    def on_user_message(self, part: MessageRun) -> MessageRun:
        return _EMPTY

    def on_tool_step(
        self, part: MessageRun, event: AssistantMessage, call_digests: list[str]
    ) -> MessageRun:
        return _EMPTY

    def on_text(self, part: MessageRun, event: AssistantMessage) -> MessageRun:
        digest = text_digest(event)
        if not digest:
            return _EMPTY
        return (digest, part[1] + 1 if digest == part[0] else 1)

    def to_snapshot(self, part: MessageRun, *, copy: bool) -> Any:
        return [part[0], part[1]]

    def from_snapshot(self, data: Any) -> MessageRun:
        digest, run = data
        return (str(digest), int(run))


MESSAGE_RUN = MessageRunTracker()


class RepeatedMessage(Rule[MessageRun]):
    name = "repeated_message"
    tracker = MESSAGE_RUN
    template = (
        "Loop warning (repeated_message): you have sent the same message {count} times in a "
        "row without calling a tool. Saying it again changes nothing: act on it, take "
        "another approach, or report the blocker."
    )

    def check(self, part: MessageRun, config: DetectionConfig) -> Hit | None:
        digest, run = part
        limit = config.message_threshold
        if run < limit:
            return None
        return Hit((), run, limit, digest)


RULE = RepeatedMessage()

"""Event records as a runtime sends them (docs/contract.md §2), optionally with local fingerprints.

With `local_fingerprints`, raw arguments, results and error texts never leave the runtime:
calls carry only `fingerprint`, results only `call_fingerprint` and `result_fingerprint`
(docs/contract.md §3), an assistant's text only its `text_fingerprint` (contract 1.3, for
the repeated-message rule), other message texts nothing, and a failed result carries a
fixed placeholder in `error`: the rules read failure from `error` being a string, its text
stays at home.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from loopwatch.models import call_fingerprint, result_fingerprint, text_fingerprint

WITHHELD_ERROR = "(error text withheld by the runtime)"
"""`error` of a failed result sent with local fingerprints."""

_CALLS_REMEMBERED = 1024  # open calls per session whose fingerprint a result may need


@dataclass(frozen=True)
class Call:
    """One tool call of an assistant message."""

    id: str
    name: str
    arguments: Any = field(default_factory=dict)


@dataclass
class EventEncoder:
    """Builds one session's event records; remembers call fingerprints for their results."""

    session_id: str
    agent_id: str | None
    local_fingerprints: bool
    _call_fingerprints: OrderedDict[str, str] = field(default_factory=OrderedDict)

    def user(self, seq: int, ts: datetime, text: str | None) -> bytes:
        return self._record("user_message", seq, ts, self._text(text))

    def system(self, seq: int, ts: datetime, text: str | None) -> bytes:
        return self._record("system_message", seq, ts, self._text(text))

    def assistant(self, seq: int, ts: datetime, text: str | None, calls: Sequence[Call]) -> bytes:
        wire_calls = []
        for call in calls:
            wire: dict[str, Any] = {"id": call.id, "name": call.name}
            if self.local_fingerprints:
                digest = call_fingerprint(call.name, call.arguments)
                self._remember(call.id, digest)
                wire["fingerprint"] = digest
            else:
                wire["arguments"] = call.arguments
            wire_calls.append(wire)
        said = self._text(text)
        if text is not None and self.local_fingerprints:  # its digest, for §9.14
            said = {"text_fingerprint": text_fingerprint(text)}
        return self._record("assistant_message", seq, ts, {**said, "tool_calls": wire_calls})

    def tool_result(
        self,
        seq: int,
        ts: datetime,
        *,
        call_id: str,
        tool_name: str,
        result: Any,
        error: str | None,
    ) -> bytes:
        body: dict[str, Any] = {"call_id": call_id, "tool_name": tool_name}
        if self.local_fingerprints:
            body["result_fingerprint"] = result_fingerprint(tool_name, result, error)
            body["error"] = None if error is None else WITHHELD_ERROR
            call_digest = self._call_fingerprints.pop(call_id, None)
            if call_digest is not None:
                body["call_fingerprint"] = call_digest
        else:
            body["result"] = result
            body["error"] = error
        return self._record("tool_result", seq, ts, body)

    def end(self, seq: int, ts: datetime) -> bytes:
        return self._record("session_end", seq, ts, {})

    def condensed(self, seq: int, ts: datetime) -> bytes:
        """`context_condensed` (contract 1.3): the runtime condensed the history."""
        return self._record("context_condensed", seq, ts, {})

    def _text(self, text: str | None) -> dict[str, Any]:
        # Only §9.14 reads a text (an assistant's); with local fingerprints none leaves.
        return {} if text is None or self.local_fingerprints else {"text": text}

    def _remember(self, call_id: str, digest: str) -> None:
        self._call_fingerprints[call_id] = digest
        while len(self._call_fingerprints) > _CALLS_REMEMBERED:
            self._call_fingerprints.popitem(last=False)

    def _record(self, kind: str, seq: int, ts: datetime, body: dict[str, Any]) -> bytes:
        if ts.tzinfo is None:
            raise ValueError("event timestamps must be timezone-aware")
        record: dict[str, Any] = {
            "v": 1,
            "type": kind,
            "session_id": self.session_id,
            "seq": seq,
            "ts": ts.isoformat(),
            **({"agent_id": self.agent_id} if self.agent_id is not None else {}),
            **body,
        }
        return json.dumps(record, ensure_ascii=False, allow_nan=False).encode("utf-8")

"""Build valid events for tests, with `seq` and `ts` assigned in order."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from loopwatch.models import AgentEvent, decode_event

_EPOCH = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)


class SessionBuilder:
    """Events of one session; each method returns the new event (also kept in `.events`)."""

    def __init__(self, session_id: str = "s1", agent_id: str | None = "agent-a") -> None:
        self.session_id = session_id
        self.agent_id = agent_id
        self.seq = 0
        self.events: list[AgentEvent] = []
        self._call_no = 0

    def _emit(self, body: dict[str, Any], seq: int | None = None) -> AgentEvent:
        seq = self.seq if seq is None else seq
        record = {
            "v": 1,
            "session_id": self.session_id,
            "seq": seq,
            "ts": (_EPOCH + timedelta(seconds=seq)).isoformat().replace("+00:00", "Z"),
            **({"agent_id": self.agent_id} if self.agent_id else {}),
            **body,
        }
        event = decode_event(json.dumps(record))
        self.seq = max(self.seq, seq) + 1
        self.events.append(event)
        return event

    def user(self, text: str = "hi") -> AgentEvent:
        return self._emit({"type": "user_message", "text": text})

    def system(self, text: str = "note") -> AgentEvent:
        return self._emit({"type": "system_message", "text": text})

    def text(self, text: str = "thinking") -> AgentEvent:
        return self._emit({"type": "assistant_message", "text": text, "tool_calls": []})

    def step(self, *calls: tuple[str, Any] | dict[str, Any]) -> AgentEvent:
        """A tool step; each call is (name, arguments) or a full call dict."""
        body = []
        for call in calls:
            if isinstance(call, dict):
                body.append(call)
            else:
                self._call_no += 1
                name, arguments = call
                body.append({"id": f"c{self._call_no}", "name": name, "arguments": arguments})
        return self._emit({"type": "assistant_message", "tool_calls": body})

    def call(self, name: str, arguments: Any = None) -> AgentEvent:
        return self.step((name, {} if arguments is None else arguments))

    def result(
        self,
        tool_name: str | None = None,
        result: Any = "ok",
        error: str | None = None,
        call_id: str | None = None,
        **extra: Any,
    ) -> AgentEvent:
        """A result; by default it answers the newest call of the newest tool step."""
        last_call = self._last_call()
        return self._emit(
            {
                "type": "tool_result",
                "call_id": call_id or last_call["id"],
                "tool_name": tool_name or last_call["name"],
                "result": result,
                "error": error,
                **extra,
            }
        )

    def end(self) -> AgentEvent:
        return self._emit({"type": "session_end"})

    def condensed(self) -> AgentEvent:
        """The platform condensed the history (contract 1.3)."""
        return self._emit({"type": "context_condensed"})

    def at(self, seq: int, body: dict[str, Any]) -> AgentEvent:
        """An event with an explicit seq (for duplicates and out-of-order tests)."""
        return self._emit(body, seq=seq)

    def _last_call(self) -> dict[str, Any]:
        for event in reversed(self.events):
            calls = getattr(event, "tool_calls", ())
            if calls:
                return {"id": calls[-1].id, "name": calls[-1].name}
        return {"id": "none", "name": "none"}

"""Per session: hold spans for a reorder window, then release them as events in span-time
order, with `seq`, each span at most once. Pure: time is the caller's (the bridge clock).

* `admit` takes one span. A span already pending, or released already or older than the
  newest released one (`start_ns` below the session's horizon), is *stale*: dropped and
  counted. That is what makes replays and restarts harmless: the horizon and the ids
  released at it are in the stored state.
* The window opens with the first pending span and closes `window_ms` later (by the
  bridge's clock); `release` then turns every pending span into events. A session with
  `MAX_PENDING_SPANS` pending is released at once.
* Turns (docs/contract.md §10): tool spans belong to the `chat` span that is their parent,
  else to the latest `chat` span under the same parent that started before them, else
  (no chat spans) tool spans under one parent that overlap in time form one turn.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from loopwatch.models import AgentEvent, AssistantMessage, ToolCall, ToolResult
from loopwatch.streams.otel.mapping import SpanRecord

MAX_PENDING_SPANS = 512
"""Pending spans per session; reaching it releases them without waiting for the window."""
MAX_HORIZON_IDS = 64
"""Ids of released spans that started exactly at the horizon (usually one)."""
STATE_VERSION = 1

Admission = Literal["pending", "stale"]


@dataclass
class BridgeSession:
    """One session's bridge state (the `otel-sessions` table value): digests only."""

    next_seq: int = 0
    horizon_ns: int = -1
    """Start time of the newest released span; spans starting before it are stale."""
    horizon_ids: list[str] = field(default_factory=list)
    pending: dict[str, SpanRecord] = field(default_factory=dict)
    opened_ms: int = 0
    """The clock at the oldest pending span: the window closes `window_ms` after it."""
    last_ms: int = 0
    """The clock at the session's newest span (its idle TTL runs from here)."""
    open_chat: tuple[str, str] | None = None
    """(span id, parent id) of the newest released chat span: later tools may be its."""

    def deadline_ms(self, window_ms: int, ttl_ms: int) -> int:
        """When the session next needs the bridge: its release, or its expiry."""
        return self.opened_ms + window_ms if self.pending else self.last_ms + ttl_ms

    def encode(self) -> bytes:
        document = {
            "v": STATE_VERSION,
            "next_seq": self.next_seq,
            "horizon_ns": self.horizon_ns,
            "horizon_ids": self.horizon_ids,
            "pending": [asdict(record) for record in self.pending.values()],
            "opened_ms": self.opened_ms,
            "last_ms": self.last_ms,
            "open_chat": self.open_chat,
        }
        return json.dumps(document, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, data: bytes) -> BridgeSession:
        document: dict[str, Any] = json.loads(data)
        if document.get("v") != STATE_VERSION:
            raise ValueError(f"unknown bridge session version {document.get('v')!r}")
        records = [SpanRecord.from_document(item) for item in document["pending"]]
        chat = document["open_chat"]
        return cls(
            next_seq=int(document["next_seq"]),
            horizon_ns=int(document["horizon_ns"]),
            horizon_ids=list(document["horizon_ids"]),
            pending={record.span_id: record for record in records},
            opened_ms=int(document["opened_ms"]),
            last_ms=int(document["last_ms"]),
            open_chat=None if chat is None else (str(chat[0]), str(chat[1])),
        )


def admit(
    state: BridgeSession | None, record: SpanRecord, now_ms: int | None = None
) -> tuple[BridgeSession, Admission]:
    """The session with `record` pending, or unchanged (but for its clock) when stale.
    `now_ms`: the bridge's clock (None: the record's own time)."""
    now = record.received_ms if now_ms is None else now_ms
    session = BridgeSession() if state is None else replace(state, pending=dict(state.pending))
    session.last_ms = max(session.last_ms, now)
    if (
        record.span_id in session.pending
        or record.start_ns < session.horizon_ns
        or (record.start_ns == session.horizon_ns and record.span_id in session.horizon_ids)
    ):
        return session, "stale"
    if not session.pending:
        session.opened_ms = now
    session.pending[record.span_id] = record
    return session, "pending"


def is_full(session: BridgeSession) -> bool:
    return len(session.pending) >= MAX_PENDING_SPANS


@dataclass
class _Turn:
    chat: SpanRecord | None
    tools: list[SpanRecord] = field(default_factory=list)
    end_ns: int = 0  # latest end of its tools (overlap grouping)


def release(state: BridgeSession) -> tuple[BridgeSession, list[AgentEvent]]:
    """Every pending span as events, in span-time order, numbered from `next_seq`."""
    spans = sorted(state.pending.values(), key=lambda s: (s.start_ns, s.end_ns, s.span_id))
    if not spans:
        return state, []
    session_id = spans[0].session_id
    turns = _turns(spans, state.open_chat)
    timed: list[tuple[int, int, int, AgentEvent]] = []  # (ts, rank, tiebreak, event)
    for index, turn in enumerate(turns):
        timed.extend(_turn_events(session_id, index, turn))
    timed.sort(key=lambda item: item[:3])
    events: list[AgentEvent] = []
    next_seq = state.next_seq
    for ts_ns, _rank, _tiebreak, event in timed:
        # seq follows span time (µs) where it can: it keeps increasing even if this state
        # were lost (idle expiry), so the worker never takes new events for duplicates.
        seq = max(next_seq, ts_ns // 1000)
        events.append(event.model_copy(update={"seq": seq}))
        next_seq = seq + 1
    horizon = spans[-1].start_ns
    chats = [span for span in spans if span.kind == "chat"]
    released = BridgeSession(
        next_seq=next_seq,
        horizon_ns=horizon,
        horizon_ids=[s.span_id for s in spans if s.start_ns == horizon][-MAX_HORIZON_IDS:],
        pending={},
        opened_ms=0,
        last_ms=state.last_ms,
        open_chat=(chats[-1].span_id, chats[-1].parent_id) if chats else state.open_chat,
    )
    return released, events


def _turns(spans: list[SpanRecord], open_chat: tuple[str, str] | None) -> list[_Turn]:
    chats = {span.span_id: span for span in spans if span.kind == "chat"}
    turns: dict[str, _Turn] = {chat_id: _Turn(chat) for chat_id, chat in chats.items()}
    latest_chat: dict[str, str] = {}  # parent id -> newest chat span under it so far
    if open_chat is not None:
        latest_chat[open_chat[1]] = open_chat[0]
    runs: dict[str, str] = {}  # parent id -> key of its current overlap run
    order: list[str] = []
    for span in spans:
        if span.kind == "chat":
            latest_chat[span.parent_id] = span.span_id
            order.append(span.span_id)
            continue
        if span.parent_id in chats or (open_chat is not None and span.parent_id == open_chat[0]):
            key = span.parent_id
        elif span.parent_id in latest_chat:
            key = latest_chat[span.parent_id]
        else:
            key = runs.get(span.parent_id, "")
            if not key or span.start_ns >= turns[key].end_ns:
                key = runs[span.parent_id] = "run:" + span.span_id
        turn = turns.get(key)
        if turn is None:
            turn = turns[key] = _Turn(None)
            order.append(key)
        turn.tools.append(span)
        turn.end_ns = max(turn.end_ns, span.end_ns)
    return [turns[key] for key in order]


def _turn_events(
    session_id: str, index: int, turn: _Turn
) -> list[tuple[int, int, int, AgentEvent]]:
    chat = turn.chat
    if not turn.tools:
        if chat is None or chat.expects_tools:
            return []  # its tools have not arrived yet: they will make the turn
        return [(chat.start_ns, 0, index, _assistant(session_id, chat, []))]
    first = turn.tools[0]
    anchor = chat if chat is not None else first
    start = min(anchor.start_ns, first.start_ns)
    timed: list[tuple[int, int, int, AgentEvent]] = [
        (start, 0, index, _assistant(session_id, anchor, turn.tools))
    ]
    for number, tool in enumerate(turn.tools):
        timed.append((tool.end_ns, 1, index * MAX_PENDING_SPANS + number, _result(tool)))
    return timed


def _ts(ns: int) -> datetime:
    micros = ns // 1000
    return datetime.fromtimestamp(micros // 1_000_000, tz=UTC) + timedelta(
        microseconds=micros % 1_000_000
    )


def _assistant(session_id: str, anchor: SpanRecord, tools: list[SpanRecord]) -> AgentEvent:
    calls = tuple(
        ToolCall(
            id=tool.call_id,
            name=tool.tool_name,
            fingerprint=tool.call_fingerprint,
            arguments=tool.read_arguments or {},
        )
        for tool in tools
    )
    agent_id = anchor.agent_id or next((t.agent_id for t in tools if t.agent_id), None)
    return AssistantMessage(
        type="assistant_message",
        session_id=session_id,
        seq=0,
        ts=_ts(min([anchor.start_ns, *(t.start_ns for t in tools)])),
        agent_id=agent_id,
        tool_calls=calls,
    )


def _result(tool: SpanRecord) -> AgentEvent:
    return ToolResult(
        type="tool_result",
        session_id=tool.session_id,
        seq=0,
        ts=_ts(tool.end_ns),
        agent_id=tool.agent_id,
        call_id=tool.call_id,
        tool_name=tool.tool_name,
        error=tool.error,
        call_fingerprint=tool.call_fingerprint,
        result_fingerprint=tool.result_fingerprint,
    )

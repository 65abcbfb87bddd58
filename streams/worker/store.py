"""`SessionStore`: the per-record pipeline's only view of state (`streams.worker.pipeline`),
and `MemorySessionStore`, a dict for tests and tools. The worker's is the faust table's
(`streams.worker.table_store`).

Both keep the verdict deliveries of this process in a `VerdictDeliveries`: sends not yet
acknowledged, and a bounded memory of acknowledged ones.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Protocol

from loopwatch.streams.worker.record import SessionRecord

MAX_REMEMBERED_ACKS = 65536

VerdictId = tuple[str, int]
"""(session_id, seq)."""


class SessionStore(Protocol):
    """The per-session records, and which verdicts are still being delivered."""

    def get(self, session_id: str) -> SessionRecord | None:
        """The session's stored record (None: it has none)."""

    def set(self, session_id: str, record: SessionRecord) -> None: ...

    def delete(self, session_id: str) -> None:
        """Remove the session's record, if any."""

    def is_unconfirmed(self, session_id: str, seq: int) -> bool:
        """That verdict was sent and the broker has not acknowledged it yet. A stored
        verdict this no longer knows of was acknowledged (or re-sent by a replay)."""

    def sent_here(self, session_id: str, seq: int) -> bool:
        """That verdict is in flight or was acknowledged in this process, so a duplicate
        of its event needs no resend."""


class _Sending:
    """The acknowledgements one publication still waits for."""

    __slots__ = ("remaining",)

    def __init__(self, remaining: int) -> None:
        self.remaining = remaining


class VerdictDeliveries:
    """Verdict sends of this process: in flight, or (recently) acknowledged. A verdict's
    publication may be several records (the verdict, its warning, the loop episodes its
    event closed): it is acknowledged once all of them are."""

    def __init__(self, max_acked: int = MAX_REMEMBERED_ACKS) -> None:
        # Sends not yet acknowledged (value: a token of that send; a resend replaces it).
        self._inflight: dict[VerdictId, _Sending] = {}
        self._acked: OrderedDict[VerdictId, None] = OrderedDict()
        self._max_acked = max_acked

    def sending(self, ident: VerdictId, records: int = 1) -> object:
        """A send of `records` records starts: the token to pass to `delivered` as each
        of them is acknowledged."""
        token = self._inflight[ident] = _Sending(records)
        return token

    def delivered(self, ident: VerdictId, token: object) -> None:
        assert isinstance(token, _Sending)
        token.remaining -= 1
        if token.remaining > 0:
            return
        if self._inflight.get(ident) is token:
            del self._inflight[ident]
        self._acked[ident] = None
        if len(self._acked) > self._max_acked:
            self._acked.popitem(last=False)

    def is_unconfirmed(self, session_id: str, seq: int) -> bool:
        return (session_id, seq) in self._inflight

    def sent_here(self, session_id: str, seq: int) -> bool:
        ident = (session_id, seq)
        return ident in self._inflight or ident in self._acked


class MemorySessionStore:
    """Session records in a dict (tests, tools): the pipeline without faust."""

    def __init__(self) -> None:
        self.records: dict[str, SessionRecord] = {}
        self.deliveries = VerdictDeliveries()

    def get(self, session_id: str) -> SessionRecord | None:
        return self.records.get(session_id)

    def set(self, session_id: str, record: SessionRecord) -> None:
        self.records[session_id] = record

    def delete(self, session_id: str) -> None:
        self.records.pop(session_id, None)

    def is_unconfirmed(self, session_id: str, seq: int) -> bool:
        return self.deliveries.is_unconfirmed(session_id, seq)

    def sent_here(self, session_id: str, seq: int) -> bool:
        return self.deliveries.sent_here(session_id, seq)

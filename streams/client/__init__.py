"""What an agent runtime imports: publish events, await verdicts, place warnings.

`LoopwatchClient` (one per process) opens a `Session` per conversation; `placement`
turns a history plus the session's warnings into the next prompt (SPEC §6).
"""

from streams.client.client import LoopwatchClient
from streams.client.encoding import Call
from streams.client.ledger import PlacedWarning
from streams.client.placement import MARKER, place_anthropic, place_openai
from streams.client.session import Session, VerdictWait
from streams.client.stats import ClientStats
from streams.client.timeline import VerdictTimeline

__all__ = [
    "MARKER",
    "Call",
    "ClientStats",
    "LoopwatchClient",
    "PlacedWarning",
    "Session",
    "VerdictTimeline",
    "VerdictWait",
    "place_anthropic",
    "place_openai",
]

"""What an agent runtime imports: publish events, await verdicts, place warnings.

`LoopwatchClient` (one per process) opens a `Session` per conversation; `placement`
turns a history plus the session's warnings into the next prompt (docs/contract.md §6).
`HistoryTracker` (`client.tracker(session_id, fmt)`) does both from a plain history in
one call per model call; `history_events` is its pure history-to-events conversion. The
framework adapters (`streams.client.langchain`, `.openai_agents`, `.pydantic_ai`,
`.claude_agent`) each import their framework and are not imported here.
"""

from loopwatch.streams.client.client import LoopwatchClient
from loopwatch.streams.client.encoding import Call
from loopwatch.streams.client.history import (
    Format,
    HistoryEvent,
    HistoryReader,
    as_agent_events,
    history_events,
)
from loopwatch.streams.client.ledger import PlacedWarning
from loopwatch.streams.client.placement import (
    MARKER,
    model_family,
    openai_points,
    place_anthropic,
    place_bedrock,
    place_gemini,
    place_openai,
    place_responses,
    responses_points,
)
from loopwatch.streams.client.session import Session, VerdictWait
from loopwatch.streams.client.stats import ClientStats
from loopwatch.streams.client.timeline import VerdictTimeline
from loopwatch.streams.client.tracker import HistoryTracker

__all__ = [
    "MARKER",
    "Call",
    "ClientStats",
    "Format",
    "HistoryEvent",
    "HistoryReader",
    "HistoryTracker",
    "LoopwatchClient",
    "PlacedWarning",
    "Session",
    "VerdictTimeline",
    "VerdictWait",
    "as_agent_events",
    "history_events",
    "model_family",
    "openai_points",
    "place_anthropic",
    "place_bedrock",
    "place_gemini",
    "place_openai",
    "place_responses",
    "responses_points",
]

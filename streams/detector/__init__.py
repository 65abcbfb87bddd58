"""The pure detector core: per-session state, the rules of docs/contract.md §4, warning texts.

No faust, aiokafka, asyncio, clocks or environment: `observe` is a deterministic
function of (state, event, config). Each rule lives in `streams.detector.rules`.
"""

from loopwatch.streams.detector.core import (
    Observation,
    advance,
    expire_episodes,
    observe,
    observe_episodes,
)
from loopwatch.streams.detector.episodes import MAX_PENDING_CALLS, OpenEpisode
from loopwatch.streams.detector.matching import first_match
from loopwatch.streams.detector.rules import (
    ALL_RULES,
    EXTENDED_ORDER,
    SEED_ORDER,
    SEED_RULES,
    Hit,
    Match,
    Rule,
    RuleSet,
    Tracker,
)
from loopwatch.streams.detector.rules.repeated_read_range import MAX_CHAIN_RANGES
from loopwatch.streams.detector.state import MAX_REMEMBERED_CALLS, STATE_VERSION, SessionState
from loopwatch.streams.detector.texts import DEFAULT_TEXTS, WarningTexts
from loopwatch.streams.detector.warning import warning_of

__all__ = [
    "ALL_RULES",
    "DEFAULT_TEXTS",
    "EXTENDED_ORDER",
    "MAX_CHAIN_RANGES",
    "MAX_PENDING_CALLS",
    "MAX_REMEMBERED_CALLS",
    "SEED_ORDER",
    "SEED_RULES",
    "STATE_VERSION",
    "Hit",
    "Match",
    "Observation",
    "OpenEpisode",
    "Rule",
    "RuleSet",
    "SessionState",
    "Tracker",
    "WarningTexts",
    "advance",
    "expire_episodes",
    "first_match",
    "observe",
    "observe_episodes",
    "warning_of",
]

"""The pure detector core: per-session state, the four rules of SPEC §4, warning texts.

No faust, aiokafka, asyncio, clocks or environment: `observe` is a deterministic
function of (state, event, config).
"""

from streams.detector.core import (
    Observation,
    evaluate,
    expire_episodes,
    observe,
    observe_episodes,
    rule_subject,
)
from streams.detector.episodes import MAX_PENDING_CALLS, OpenEpisode
from streams.detector.state import (
    MAX_CHAIN_RANGES,
    MAX_REMEMBERED_CALLS,
    STATE_VERSION,
    SessionState,
)
from streams.detector.texts import DEFAULT_TEXTS, WarningTexts

__all__ = [
    "DEFAULT_TEXTS",
    "MAX_CHAIN_RANGES",
    "MAX_PENDING_CALLS",
    "MAX_REMEMBERED_CALLS",
    "STATE_VERSION",
    "Observation",
    "OpenEpisode",
    "SessionState",
    "WarningTexts",
    "evaluate",
    "expire_episodes",
    "observe",
    "observe_episodes",
    "rule_subject",
]

"""The loopwatch wire contract (docs/contract.md): events, verdicts, config and fingerprints.

No I/O and nothing of faust or aiokafka: agent runtimes may import this package alone.
"""

from models.config import ConfigError, DetectionConfig
from models.episodes import EPISODE_ADAPTER, EPISODE_OUTCOMES, EpisodeOutcome, LoopEpisode
from models.events import (
    EVENT_ADAPTER,
    AgentEvent,
    AssistantMessage,
    InvalidEvent,
    SessionEnd,
    SystemMessage,
    ToolCall,
    ToolResult,
    UserMessage,
    decode_event,
)
from models.fingerprints import call_fingerprint, result_fingerprint
from models.verdicts import RULES, VERDICT_ADAPTER, LoopVerdict, LoopWarning, RuleName

__all__ = [
    "EPISODE_ADAPTER",
    "EPISODE_OUTCOMES",
    "EVENT_ADAPTER",
    "RULES",
    "VERDICT_ADAPTER",
    "AgentEvent",
    "AssistantMessage",
    "ConfigError",
    "DetectionConfig",
    "EpisodeOutcome",
    "InvalidEvent",
    "LoopEpisode",
    "LoopVerdict",
    "LoopWarning",
    "RuleName",
    "SessionEnd",
    "SystemMessage",
    "ToolCall",
    "ToolResult",
    "UserMessage",
    "call_fingerprint",
    "decode_event",
    "result_fingerprint",
]

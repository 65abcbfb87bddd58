"""The loopwatch wire contract (docs/contract.md): events, verdicts, config and fingerprints.

No I/O and nothing of faust or aiokafka: agent runtimes may import this package alone.
"""

from loopwatch.models.config import PROFILE_RULES, ConfigError, DetectionConfig, Profile
from loopwatch.models.episodes import (
    EPISODE_ADAPTER,
    EPISODE_OUTCOMES,
    EpisodeOutcome,
    LoopEpisode,
    broken_at_first_warning,
)
from loopwatch.models.events import (
    EVENT_ADAPTER,
    TOO_DEEP,
    AgentEvent,
    AssistantMessage,
    ContextCondensed,
    InvalidEvent,
    SessionEnd,
    SystemMessage,
    ToolCall,
    ToolResult,
    UserMessage,
    decode_event,
)
from loopwatch.models.fingerprints import call_fingerprint, result_fingerprint, text_fingerprint
from loopwatch.models.policy import DEFAULT_KEY, InvalidPolicy, Policy, parse_policy
from loopwatch.models.reply import (
    REPLY_PARTITION_HEADER,
    ReplyProblem,
    reply_header,
    reply_partition,
)
from loopwatch.models.verdicts import (
    ALL_RULES,
    RULES,
    VERDICT_ADAPTER,
    LoopVerdict,
    LoopWarning,
    PolicyRef,
    RuleName,
)

__all__ = [
    "ALL_RULES",
    "DEFAULT_KEY",
    "EPISODE_ADAPTER",
    "EPISODE_OUTCOMES",
    "EVENT_ADAPTER",
    "PROFILE_RULES",
    "REPLY_PARTITION_HEADER",
    "RULES",
    "TOO_DEEP",
    "VERDICT_ADAPTER",
    "AgentEvent",
    "AssistantMessage",
    "ConfigError",
    "ContextCondensed",
    "DetectionConfig",
    "EpisodeOutcome",
    "InvalidEvent",
    "InvalidPolicy",
    "LoopEpisode",
    "LoopVerdict",
    "LoopWarning",
    "Policy",
    "PolicyRef",
    "Profile",
    "ReplyProblem",
    "RuleName",
    "SessionEnd",
    "SystemMessage",
    "ToolCall",
    "ToolResult",
    "UserMessage",
    "broken_at_first_warning",
    "call_fingerprint",
    "decode_event",
    "parse_policy",
    "reply_header",
    "reply_partition",
    "result_fingerprint",
    "text_fingerprint",
]

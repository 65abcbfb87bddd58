"""Loop episodes (the project's contract, `loop-episodes`): one record per closed loop.

A loop episode of a session starts with its first warning for a rule and subject (the
repeated call, read target or batch) and ends when the agent moves on, when the session
ends, or when its state expires. The record holds names, digests and counts only, never
arguments, results or error text.
"""

from __future__ import annotations

from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, TypeAdapter

from loopwatch.models.verdicts import RuleName

EpisodeOutcome = Literal["broken", "session_ended", "expired"]
"""How an episode ended: the agent moved on, the session ended, or its state expired."""

EPISODE_OUTCOMES: tuple[EpisodeOutcome, ...] = ("broken", "session_ended", "expired")


class LoopEpisode(BaseModel):
    """One loop of one session, from its first warning to its end."""

    model_config = ConfigDict(frozen=True)

    v: Literal[1] = 1
    """Schema version."""
    type: Literal["loop_episode"] = "loop_episode"
    """Discriminator."""
    session_id: str
    """The session that looped."""
    agent_id: str | None
    """The agent id of the session's newest event, if any."""
    rule: RuleName
    """The rule whose warnings made up the episode."""
    subject: str
    """A short digest of what repeated (the call, read target or batch): names no content."""
    tool_names: tuple[str, ...]
    """The tool(s) involved, sorted (as in the warnings)."""
    first_seq: int = Field(ge=0)
    """The `seq` of the event that got the episode's first warning."""
    last_seq: int = Field(ge=0)
    """The `seq` of the event that closed the episode (the last warned event if expired)."""
    started_at: AwareDatetime
    """Event time of the first warning."""
    ended_at: AwareDatetime
    """Event time of the closing event (of the last warned event if expired)."""
    peak_count: int = Field(ge=1)
    """The highest repeat count any of the episode's warnings carried."""
    warnings: int = Field(ge=1)
    """How many verdict warnings the episode had (a warning repeats at every verdict
    while its condition holds, the next assistant message's included)."""
    outcome: EpisodeOutcome
    """Why it ended."""
    duration_seconds: float = Field(ge=0)
    """`ended_at - started_at` in seconds (event time)."""
    warned_calls: int | None = Field(None, ge=0)
    """Model calls that saw its warning: the assistant messages after its first warned
    event, up to its end (contract §8.3). 1 for a broken episode: the agent changed
    course at the first model call that saw the warning. None in records written before
    it existed."""

    def to_json(self) -> bytes:
        """The wire form: compact JSON, UTF-8."""
        # model_dump_json() with its defaults, without its str round trip (once per event)
        return LoopEpisode.__pydantic_serializer__.to_json(self)


EPISODE_ADAPTER: TypeAdapter[LoopEpisode] = TypeAdapter(LoopEpisode)


def broken_at_first_warning(episode: LoopEpisode) -> bool:
    """The agent changed course at the first model call that saw the warning (contract
    §8.3): broken with at most one warned model call. A record from before
    `warned_calls` falls back to a single verdict warning."""
    if episode.outcome != "broken":
        return False
    if episode.warned_calls is None:
        return episode.warnings == 1
    return episode.warned_calls <= 1

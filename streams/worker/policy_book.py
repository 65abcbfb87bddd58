"""The policies in force, folded from `loopwatch-config` records (docs/contract.md §9.7).

Pure: the worker's follower and `loopwatch policy` feed it records; the per-record
pipeline asks it which config judges an agent.
"""

from __future__ import annotations

from loopwatch.models import (
    DEFAULT_KEY,
    DetectionConfig,
    InvalidPolicy,
    Policy,
    PolicyRef,
    parse_policy,
)
from loopwatch.models.policy import check_key


class PolicyBook:
    """The newest valid policy per key, over the worker's built-in config."""

    def __init__(self, builtin: DetectionConfig) -> None:
        self.builtin = builtin
        """Judges agents that no record covers (the worker's settings)."""
        self._policies: dict[str, Policy] = {}
        # What `judge` returns per key, built once per record (it runs for every event).
        self._judged: dict[str, tuple[DetectionConfig, PolicyRef]] = {}
        self.highest_version = 0
        """The highest version of any valid record folded in, removed ones included
        (`policy set` gives a new record a version above it: contract §9.7)."""

    def apply(self, key: bytes | None, value: bytes | None) -> Policy | None:
        """Fold one record in: a policy replaces the key's, a tombstone removes it.

        Returns the new policy (None for a tombstone). An invalid record raises
        InvalidPolicy and changes nothing: the key's previous policy stays.
        """
        if value is None:
            removed = check_key(key)
            self._policies.pop(removed, None)
            self._judged.pop(removed, None)
            return None
        policy = parse_policy(key, value)
        self.highest_version = max(self.highest_version, policy.version)
        self._policies[policy.key] = policy
        self._judged[policy.key] = (policy.config, policy.ref)
        return policy

    def judge(self, agent_id: str | None) -> tuple[DetectionConfig, PolicyRef | None]:
        """The config for an agent's events and what its verdicts say about it."""
        judged = self._judged
        if judged:
            found = judged.get(agent_id) if agent_id is not None else None
            if found is None:
                found = judged.get(DEFAULT_KEY)
            if found is not None:
                return found
        return self.builtin, None

    def get(self, key: str) -> Policy | None:
        return self._policies.get(key)

    def policies(self) -> list[Policy]:
        """Every policy in force, by key."""
        return [self._policies[key] for key in sorted(self._policies)]


__all__ = ["InvalidPolicy", "PolicyBook"]

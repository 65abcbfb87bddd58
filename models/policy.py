"""Policy records (contract §9.6): one per agent id (or `*`) on the compacted
`loopwatch-config` topic, each a versioned `DetectionConfig`."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from loopwatch.models.config import ConfigError, DetectionConfig
from loopwatch.models.verdicts import PolicyRef

DEFAULT_KEY = "*"
"""The key of the fleet-wide default policy."""
MAX_KEY_CHARS = 256


class InvalidPolicy(ValueError):
    """A policy record that cannot be used; the message names the field and the problem."""


@dataclass(frozen=True, slots=True)
class Policy:
    """A policy record: its key, its version and the config it puts in force."""

    key: str
    version: int
    config: DetectionConfig

    @property
    def ref(self) -> PolicyRef:
        """What a verdict judged by this policy carries (contract §9.8)."""
        return PolicyRef(key=self.key, version=self.version)

    def to_record(self) -> dict[str, Any]:
        """The record's JSON object: `v`, `version` and the fields that differ from the
        defaults (a record is complete by itself: missing means default)."""
        fields = self.config.model_dump(mode="json", exclude_unset=True)
        return {"v": 1, "version": self.version, **fields}

    def to_json(self) -> bytes:
        return json.dumps(self.to_record(), sort_keys=True, separators=(",", ":")).encode()


def check_key(key: bytes | str | None) -> str:
    """The record key as an agent id (or `*`); InvalidPolicy when it cannot be one."""
    if key is None:
        raise InvalidPolicy("record has no key (the agent id, or * for the default)")
    if isinstance(key, bytes):
        try:
            key = key.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidPolicy("record key is not UTF-8") from None
    if not 1 <= len(key) <= MAX_KEY_CHARS:
        raise InvalidPolicy(f"record key must be 1-{MAX_KEY_CHARS} characters")
    return key


def parse_policy(
    key: bytes | str | None, value: bytes | str | Mapping[str, Any], *, version: int | None = None
) -> Policy:
    """Validate one record; `version` fills in a record that has none (`policy set`).

    Raises InvalidPolicy naming the bad field; never echoes more than the bad value.
    """
    agent = check_key(key)
    document = _document(value)
    fields = dict(document)
    if fields.pop("v", 1) != 1:
        raise InvalidPolicy(f"v must be 1, got {document['v']!r}")
    found = fields.pop("version", version)
    if found is None:
        raise InvalidPolicy("version is required (an integer >= 1)")
    if isinstance(found, bool) or not isinstance(found, int) or found < 1:
        raise InvalidPolicy(f"version must be an integer >= 1, got {found!r}")
    try:
        config = DetectionConfig(**fields)
    except ConfigError as exc:
        raise InvalidPolicy(str(exc)) from None
    return Policy(agent, found, config)


def _document(value: bytes | str | Mapping[str, Any]) -> Mapping[str, Any]:
    if isinstance(value, Mapping):
        return value
    try:
        text = value.decode("utf-8") if isinstance(value, bytes) else value
    except UnicodeDecodeError:
        raise InvalidPolicy("record is not UTF-8") from None
    try:
        document = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise InvalidPolicy(f"record is not JSON ({str(exc).splitlines()[0][:120]})") from None
    if not isinstance(document, dict):
        raise InvalidPolicy("record must be a JSON object")
    return document

"""JSON Schema of the wire contract, so runtimes in other languages can validate."""

from __future__ import annotations

from typing import Any

from models.episodes import EPISODE_ADAPTER
from models.events import EVENT_ADAPTER
from models.verdicts import VERDICT_ADAPTER

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


def event_schema() -> dict[str, Any]:
    """Schema of one `agent-events` record (SPEC §2)."""
    return _with_header(EVENT_ADAPTER.json_schema(mode="validation"), "loopwatch agent event v1")


def verdict_schema() -> dict[str, Any]:
    """Schema of one `loop-verdicts` / `loop-warnings` record (SPEC §5)."""
    return _with_header(
        VERDICT_ADAPTER.json_schema(mode="serialization"), "loopwatch loop verdict v1"
    )


def episode_schema() -> dict[str, Any]:
    """Schema of one `loop-episodes` record (docs/contract.md §8)."""
    return _with_header(
        EPISODE_ADAPTER.json_schema(mode="serialization"), "loopwatch loop episode v1"
    )


def _with_header(schema: dict[str, Any], title: str) -> dict[str, Any]:
    return {"$schema": SCHEMA_DIALECT, "title": title, **schema}

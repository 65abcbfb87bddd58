"""JSON Schema of the wire contract, so runtimes in other languages can validate."""

from __future__ import annotations

from typing import Any

from loopwatch.models.episodes import EPISODE_ADAPTER
from loopwatch.models.events import EVENT_ADAPTER
from loopwatch.models.verdicts import VERDICT_ADAPTER

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
# Stable identifiers, so that other schemas and validators can refer to these by URI;
# the version in the path is the records' `v`.
EVENT_SCHEMA_ID = "https://loopwatch.dev/schema/agent-event/v1.json"
VERDICT_SCHEMA_ID = "https://loopwatch.dev/schema/loop-verdict/v1.json"
EPISODE_SCHEMA_ID = "https://loopwatch.dev/schema/loop-episode/v1.json"


def event_schema() -> dict[str, Any]:
    """Schema of one `agent-events` record (docs/contract.md §2)."""
    return _with_header(
        EVENT_ADAPTER.json_schema(mode="validation"), EVENT_SCHEMA_ID, "loopwatch agent event v1"
    )


def verdict_schema() -> dict[str, Any]:
    """Schema of one `loop-verdicts` / `loop-warnings` record (docs/contract.md §5)."""
    return _with_header(
        VERDICT_ADAPTER.json_schema(mode="serialization"),
        VERDICT_SCHEMA_ID,
        "loopwatch loop verdict v1",
    )


def episode_schema() -> dict[str, Any]:
    """Schema of one `loop-episodes` record (docs/contract.md §8)."""
    return _with_header(
        EPISODE_ADAPTER.json_schema(mode="serialization"),
        EPISODE_SCHEMA_ID,
        "loopwatch loop episode v1",
    )


def _with_header(schema: dict[str, Any], schema_id: str, title: str) -> dict[str, Any]:
    return {"$schema": SCHEMA_DIALECT, "$id": schema_id, "title": title, **schema}

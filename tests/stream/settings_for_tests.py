"""Worker settings for stream tests: memory store, one partition, no broker reached."""

from __future__ import annotations

from typing import Any

from loopwatch.streams.settings import Settings


def stream_settings(**overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "app_id": "loopwatch-stream-test",
        "bootstrap_servers": "127.0.0.1:1",  # test_context never connects
        "store_url": "memory://",
        "partitions": 1,
        "max_event_bytes": 4096,
    }
    values.update(overrides)
    return Settings(**values)

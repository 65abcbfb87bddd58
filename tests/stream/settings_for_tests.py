"""Worker settings for stream tests: memory store, one partition, no broker reached."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from models import DetectionConfig


def stream_settings(**overrides: Any) -> Any:
    values: dict[str, Any] = {
        "app_id": "loopwatch-stream-test",
        "bootstrap_servers": "127.0.0.1:1",
        "store_url": "memory://",
        "data_dir": "/tmp/loopwatch-stream-test",
        "partitions": 1,
        "processing_guarantee": "at_least_once",
        "web_host": "127.0.0.1",
        "web_port": 6066,  # never bound: test_context starts no web server
        "events_topic": "agent-events",
        "verdicts_topic": "loop-verdicts",
        "warnings_topic": "loop-warnings",
        "dlq_topic": "agent-events-dlq",
        "session_ttl_seconds": 86400,
        "ended_retention_seconds": 0,
        "detection": DetectionConfig(),
        "max_event_bytes": 4096,
    }
    values.update(overrides)
    return SimpleNamespace(faust_security=dict, **values)

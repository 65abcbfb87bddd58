"""The bridge's settings: the worker's `Settings` (broker, security, `agent-events`, the
dead-letter topic, partitions, store) plus its own `LOOPWATCH_OTEL_*` variables, validated
the same way (a bad value stops start-up with a message naming the variable)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from loopwatch.streams.env_values import SettingsError, choice, integer, port, topic_name
from loopwatch.streams.otel.mapping import Unrecorded
from loopwatch.streams.otel.spans import Encoding
from loopwatch.streams.settings import Settings

MAX_WINDOW_MS = 600_000
TABLE_NAME = "otel-sessions"


@dataclass(frozen=True)
class OtelSettings:
    base: Settings
    """Broker, security, events and dead-letter topics, partitions, store, TTL."""
    app_id: str = "loopwatch-otel-bridge"
    """Consumer group and prefix of the bridge's own topics (not the worker's)."""
    spans_topic: str = "otlp_spans"
    """The Collector Kafka exporter's `traces::topic`."""
    encoding: Encoding = "otlp_proto"
    """The exporter's `traces::encoding`: `otlp_proto` or `otlp_json`."""
    reorder_window_ms: int = 5000
    unrecorded: Unrecorded = "distinct"
    web_port: int = 6067

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> OtelSettings:
        env = os.environ if environ is None else environ
        base = Settings.from_env(env)

        def get(name: str) -> str | None:
            raw = env.get(name, "").strip()
            return raw or None  # set but empty counts as unset, as for the worker

        values: dict[str, object] = {}
        for field, name, parse in (
            ("app_id", "LOOPWATCH_OTEL_APP_ID", topic_name),
            ("spans_topic", "LOOPWATCH_OTEL_TOPIC", topic_name),
            ("encoding", "LOOPWATCH_OTEL_ENCODING", choice("otlp_proto", "otlp_json")),
            ("reorder_window_ms", "LOOPWATCH_OTEL_REORDER_WINDOW_MS", _window),
            ("unrecorded", "LOOPWATCH_OTEL_UNRECORDED", choice("distinct", "names")),
            ("web_port", "LOOPWATCH_OTEL_WEB_PORT", port),
        ):
            raw = get(name)
            if raw is not None:
                values[field] = parse(name, raw)
        settings = cls(base, **values)  # type: ignore[arg-type]  # parsers check types
        if settings.app_id == base.app_id:
            raise SettingsError(
                f"LOOPWATCH_OTEL_APP_ID must differ from LOOPWATCH_APP_ID ({base.app_id!r}): "
                "the bridge needs a consumer group and state of its own"
            )
        if settings.spans_topic in (base.events_topic, settings.internal_topic):
            raise SettingsError(
                f"LOOPWATCH_OTEL_TOPIC must not be the events topic, got {settings.spans_topic!r}"
            )
        return settings

    @property
    def internal_topic(self) -> str:
        """Span records re-keyed by session (and the ticks that close windows)."""
        return f"{self.app_id}-spans"

    @property
    def changelog_topic(self) -> str:
        return f"{self.app_id}-{TABLE_NAME}-changelog"


def _window(name: str, raw: str) -> int:
    value: int = integer(0)(name, raw)
    if value > MAX_WINDOW_MS:
        raise SettingsError(f"{name} must be milliseconds from 0 to {MAX_WINDOW_MS}, got {raw!r}")
    return value

"""`LOOPWATCH_LOG_FORMAT=json`: one JSON object per log line, for log pipelines.

Keys: `time` (RFC 3339, UTC), `level`, `logger`, `message`, then any fields a call passed
with `extra=` (such as `partition`), and `exception` when there is one.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

# Attributes every LogRecord has: anything else on a record came from `extra=`.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {
    "message",
    "asctime",
    "color_message",
}


class JsonLogFormatter(logging.Formatter):
    """Formats a record as one line of JSON."""

    def format(self, record: logging.LogRecord) -> str:
        document: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                document[key] = value
        if record.exc_info:
            document["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            document["exception"] = record.exc_text
        return json.dumps(document, default=str, ensure_ascii=False)


def use_json(logger: logging.Logger) -> None:
    """Give every handler of `logger` (the root logger, set up by faust) the JSON format."""
    for handler in logger.handlers:
        handler.setFormatter(JsonLogFormatter())

"""Volatile fields of tool results and errors (docs/contract.md §9.9): the *loose* result
fingerprint the extended profile's rules compare, so that identical calls whose results
differ only in a duration, a timestamp, a run id or an error's counter count as the same
result. The seed's fingerprint (§3) is unchanged: this is a second digest, computed by
the worker from raw fields; a runtime that sends its own `result_fingerprint` keeps it.

1. The result: every object key whose *folded* form (lowercase, `_` and `-` removed) is
   in `VOLATILE_KEYS`, or that ends in `At`, `_at` or `-at`, is dropped at every depth,
   and so are the tool's own keys from the policy's `result_ignore` (exact names). In
   every string, each match of `VOLATILE_TEXT` is replaced by `<v>`, and then each match
   of the tool's own patterns (`result_ignore` entries written `re:<pattern>`).
2. The error text: `VOLATILE_TEXT` as above, then `ERROR_DETAIL` (quoted text, paths,
   numbers) replaced by `<x>`: what is left is the error's *class*.
3. The digest is §3's result fingerprint of the result and error so cleaned.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from loopwatch.models.fingerprints import result_fingerprint

VOLATILE_KEYS = frozenset(
    {
        # durations
        "duration", "durationms", "durationsec", "durationseconds", "elapsed", "elapsedms",
        "elapsedtime", "elapsedsec", "elapsedseconds", "took", "tookms", "timems",
        "latency", "latencyms", "runtime", "runtimems", "executiontime", "executiontimems",
        # times
        "time", "timestamp", "ts", "date", "createdat", "updatedat", "startedat",
        "finishedat", "completedat", "endedat", "modifiedat", "now", "servertime",
        # ids of one run, message or request
        "requestid", "runid", "messageid", "receiptid", "traceid", "spanid", "sessionid",
        "correlationid", "executionid", "invocationid", "jobrunid", "pid", "nonce", "etag",
        # attempt counters
        "attempt", "attempts", "attemptcount", "attemptnumber", "retry", "retries",
        "retrycount", "trycount",
    }
)  # fmt: skip
"""Folded key names dropped from results (§9.9)."""

VOLATILE_TEXT = re.compile(
    r"[0-9](?:"
    r"[0-9]{3}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:[.,][0-9]+)?)?"
    r"(?:Z|[+-][0-9]{2}:?[0-9]{2})?"  # ISO date-time
    r"|[0-9]?:[0-9]{2}:[0-9]{2}(?:[.,][0-9]+)?"  # clock time
    r"|[0-9a-f]{7}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"  # UUID
    r"|[0-9]*(?:\.[0-9]+)? ?(?:ms|s|sec|secs|seconds|us|µs)(?![A-Za-z])"  # duration
    r")"
)
"""Timestamps, clock times, UUIDs (starting with a digit) and durations in text. Every
alternative starts with a digit, so scanning a long string costs little."""

ERROR_DETAIL = re.compile(
    r"'[^'\n]*'|\"[^\"\n]*\"|`[^`\n]*`"  # quoted
    r"|(?:[A-Za-z]:)?(?:[\\/][^\s'\"`:,;()\[\]{}<>]+)+"  # paths
    r"|[0-9]+"  # numbers
)
"""What varies between errors of one class: quoted text, paths, numbers."""

VOLATILE_MARK = "<v>"
DETAIL_MARK = "<x>"


@lru_cache(maxsize=4096)
def is_volatile_key(key: str) -> bool:
    """Its folded form (lowercase, `_` and `-` removed) is in `VOLATILE_KEYS`, or it names
    a moment: it ends in `At`, `_at` or `-at` (`checkedAt`, `last_seen_at`). Remembered
    for the 4,096 newest keys: results repeat their keys."""
    if key.endswith(("At", "_at", "-at")):
        return True
    return key.lower().replace("_", "").replace("-", "") in VOLATILE_KEYS


class ResultCleaner:
    """The cleaning of step 1-2 for one policy's `result_ignore` (tool → keys and
    `re:` patterns)."""

    def __init__(self, ignore: Mapping[str, tuple[str, ...]]) -> None:
        self._keys: dict[str, frozenset[str]] = {}
        self._patterns: dict[str, re.Pattern[str]] = {}
        for tool, entries in ignore.items():
            keys = frozenset(entry for entry in entries if not entry.startswith("re:"))
            patterns = [entry[3:] for entry in entries if entry.startswith("re:")]
            if keys:
                self._keys[tool] = keys
            if patterns:
                self._patterns[tool] = re.compile("|".join(f"(?:{p})" for p in patterns))

    def fingerprint(self, tool_name: str, result: Any, error: str | None) -> str:
        """The loose result fingerprint (§9.9)."""
        keys = self._keys.get(tool_name, frozenset())
        pattern = self._patterns.get(tool_name)
        cleaned = _clean(result, keys, pattern) if result is not None else None
        return result_fingerprint(tool_name, cleaned, None if error is None else error_class(error))


def error_class(error: str) -> str:
    """An error text with its volatile parts and details masked (§9.9 step 2)."""
    return ERROR_DETAIL.sub(DETAIL_MARK, VOLATILE_TEXT.sub(VOLATILE_MARK, error))


def _clean(value: Any, keys: frozenset[str], pattern: re.Pattern[str] | None) -> Any:
    kind = type(value)
    if kind is str:
        text = VOLATILE_TEXT.sub(VOLATILE_MARK, value)
        return text if pattern is None else pattern.sub(VOLATILE_MARK, text)
    if kind is dict:
        return {
            key: _clean(item, keys, pattern)
            for key, item in value.items()
            if not (is_volatile_key(key) or key in keys)
        }
    if kind is list:
        return [_clean(item, keys, pattern) for item in value]
    if isinstance(value, str):
        return _clean(str(value), keys, pattern)
    return value


NO_IGNORE = ResultCleaner({})

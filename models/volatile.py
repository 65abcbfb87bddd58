"""Volatile fields of tool results and errors (docs/contract.md §9.9): the *loose* result
fingerprint the extended profile's rules compare, so that identical calls whose results
differ only in a duration, a timestamp, a run id or an error's counter count as the same
result. The seed's fingerprint (§3) is unchanged: this is a second digest, computed by
the worker from raw fields; a runtime that sends its own `result_fingerprint` keeps it.

1. The result: every object key whose *folded* form (lowercase, `_` and `-` removed) is
   in `VOLATILE_KEYS`, or that ends in `At`, `_at` or `-at`, is dropped at every depth,
   and so are the tool's own keys from the policy's `result_ignore` (exact names). In
   every string, each `UUID` and then each match of `VOLATILE_TEXT` is replaced by
   `<v>`, and then each match of the tool's own patterns (`result_ignore` entries written
   `re:<pattern>`).
2. The error text: `UUID` and `VOLATILE_TEXT` as above, then `ERROR_DETAIL` (quoted
   text, paths, numbers) replaced by `<x>`: what is left is the error's *class*.
3. The digest is §3's result fingerprint of the result and error so cleaned.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from loopwatch.models.fingerprints import _digest_of, normalise_text

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

VOLATILE_MARK = "<v>"
DETAIL_MARK = "<x>"

UUID = re.compile(r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}")
"""UUIDs in text, replaced first."""
_UUID_CORE = re.compile(r"-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-")
"""What every UUID contains: a cheap search (a literal start) before the whole pattern."""

VOLATILE_TEXT = re.compile(
    r"[0-9]++(?:"
    r"-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:[.,][0-9]+)?)?"
    r"(?:Z|[+-][0-9]{2}:?[0-9]{2})?"  # ISO date-time
    r"|:[0-9]{2}:[0-9]{2}(?:[.,][0-9]+)?"  # clock time
    r"|(?:\.[0-9]+)? ?(?:ms|s|sec|secs|seconds|us|µs)(?![A-Za-z])"  # duration
    r")"
)
"""ISO date-times, clock times and durations in text, after UUIDs. A run of digits is
taken whole (possessive) and only then the rest is tried: scanning text full of numbers
stays cheap."""


MASKED_EDGE = 256
"""A string longer than twice this is masked in its first and last `MASKED_EDGE`
characters only (where outputs carry their times and durations: headers, summaries);
its middle is kept as it is. Scanning text costs ~10-20 ns a character in Python's
regex engine: this bounds the cost per string."""


def mask_volatile(text: str) -> str:
    """UUIDs, then `VOLATILE_TEXT`, replaced by `<v>` (§9.9), within `MASKED_EDGE`
    characters of either end of a long string."""
    if len(text) > 2 * MASKED_EDGE:
        edge = MASKED_EDGE
        return _mask(text[:edge]) + text[edge:-edge] + _mask(text[-edge:])
    return _mask(text)


def _mask(text: str) -> str:
    if "-" in text and _UUID_CORE.search(text) is not None:
        text = UUID.sub(VOLATILE_MARK, text)
    return VOLATILE_TEXT.sub(VOLATILE_MARK, text)


ERROR_DETAIL = re.compile(
    r"'[^'\n]*'|\"[^\"\n]*\"|`[^`\n]*`"  # quoted
    r"|(?:[\\/][^\s'\"`:,;()\[\]{}<>]+)+"  # paths
    r"|[0-9]+"  # numbers
)
"""What varies between errors of one class: quoted text, paths, numbers."""


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
        """The loose result fingerprint (§9.9): §3's result fingerprint of the cleaned
        result and error, in one walk (cleaning and §3's normalisation together)."""
        keys = self._keys.get(tool_name, _NO_KEYS)
        pattern = self._patterns.get(tool_name)
        other: list[Any] = []
        document = {
            "tool_name": _text(tool_name),
            "success": error is None,
            "result": _clean(result, keys, pattern, other),
            "error": None if error is None else normalise_text(error_class(error)),
            "connection_required": None,
        }
        return _digest_of(document, other)


_NO_KEYS: frozenset[str] = frozenset()


def error_class(error: str) -> str:
    """An error text with its volatile parts and details masked (§9.9 step 2), within
    `MASKED_EDGE` characters of either end of a long one (a traceback)."""
    if len(error) > 2 * MASKED_EDGE:
        edge = MASKED_EDGE
        return _error_class(error[:edge]) + error[edge:-edge] + _error_class(error[-edge:])
    return _error_class(error)


def _error_class(error: str) -> str:
    return ERROR_DETAIL.sub(DETAIL_MARK, _mask(error))


def _text(value: str) -> str:
    """§3's string normalisation (`models.fingerprints`), its fast path first."""
    if "\n" not in value and "\r" not in value:
        return value.strip()
    return normalise_text(value)


def _clean(
    value: Any, keys: frozenset[str], pattern: re.Pattern[str] | None, other: list[Any]
) -> Any:
    """Step 1 and §3's normalisation; appends to `other` each leaf that is not exactly a
    str, int, bool or None (as `models.fingerprints._normalise` does)."""
    kind = type(value)
    if kind is str:
        text = mask_volatile(value)
        return _text(text if pattern is None else pattern.sub(VOLATILE_MARK, text))
    if kind is dict:
        return {
            key: _clean(item, keys, pattern, other)
            for key, item in value.items()
            if not (is_volatile_key(key) or key in keys)
        }
    if kind is list:
        return [_clean(item, keys, pattern, other) for item in value]
    if kind is int or kind is bool or value is None:
        return value
    other.append(value)
    if isinstance(value, str):
        return _clean(str(value), keys, pattern, other)
    if isinstance(value, dict):
        return _clean(dict(value), keys, pattern, other)
    if isinstance(value, list | tuple):
        return [_clean(item, keys, pattern, other) for item in value]
    return value


NO_IGNORE = ResultCleaner({})

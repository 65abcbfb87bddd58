"""The loose result fingerprint (docs/contract.md §9.9) against a plain reading: clean the
value, then take §3's result fingerprint of it."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from loopwatch.models import result_fingerprint
from loopwatch.models.volatile import VOLATILE_KEYS, VOLATILE_TEXT, ResultCleaner, error_class
from tests.support import reference_extended


def plain_clean(value: Any, keys: set[str]) -> Any:
    if isinstance(value, str):
        return reference_extended._edges(value, reference_extended._volatile)
    if isinstance(value, dict):
        return {
            k: plain_clean(v, keys)
            for k, v in value.items()
            if k.lower().replace("_", "").replace("-", "") not in VOLATILE_KEYS
            and not k.endswith(("At", "_at", "-at"))
            and k not in keys
        }
    if isinstance(value, list):
        return [plain_clean(v, keys) for v in value]
    return value


texts = st.sampled_from(
    [
        "ok",
        " done in 0.53s \r\n",
        "at 2026-01-02T10:00:00Z",
        "at 10:00:01.5",
        "id A1B2C3D4-aaaa-bbbb-cccc-0123456789ab",
        "3 failed, 2 passed",
        "line\n  trailing  \nx",
        "120 ms",
        "5 seconds",
        "5 sections",
        "took 10:00:01 " + "x" * 600 + " 10:00:02 " + "y" * 200 + " in 0.5s",
    ]
)
keys = st.sampled_from(
    ["out", "durationMs", "elapsed", "checkedAt", "run_id", "Pid", "n", "format"]
)
values = st.recursive(
    st.one_of(texts, st.integers(-5, 5), st.booleans(), st.none(), st.floats(0, 2)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(keys, inner, max_size=3)),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(value=values, error=st.one_of(st.none(), texts), ignore=st.booleans())
def test_the_one_walk_equals_clean_then_fingerprint(
    value: Any, error: str | None, ignore: bool
) -> None:
    own = {"n"} if ignore else set()
    cleaner = ResultCleaner({"t": tuple(own)})
    masked = None if error is None else reference_extended.error_kind(error)
    assert cleaner.fingerprint("t", value, error) == result_fingerprint(
        "t", plain_clean(value, own), masked
    )


def test_what_is_masked_and_what_is_not() -> None:
    assert VOLATILE_TEXT.sub("<v>", "3 failed in 0.53s at 10:00:01") == "3 failed in <v> at <v>"
    assert VOLATILE_TEXT.sub("<v>", "5 sections, 12 items") == "5 sections, 12 items"
    assert error_class("No such file: '/tmp/a1/x.txt' (errno 2)") == "No such file: <x> (errno <x>)"
    assert error_class("permission denied: /etc/a") == error_class("permission denied: /var/b")
    assert error_class("permission denied: /etc/a") != error_class("disk full")


def test_a_long_string_is_masked_at_its_ends_only() -> None:
    text = "at 10:00:01 " + "x" * 600 + " at 10:00:02 " + "y" * 300 + " in 0.5s"
    other = "at 10:00:09 " + "x" * 600 + " at 10:00:02 " + "y" * 300 + " in 0.9s"
    cleaner = ResultCleaner({})
    assert cleaner.fingerprint("t", text, None) == cleaner.fingerprint("t", other, None)
    middle = "at 10:00:01 " + "x" * 600 + " at 10:00:07 " + "y" * 300 + " in 0.5s"
    assert cleaner.fingerprint("t", text, None) != cleaner.fingerprint("t", middle, None)

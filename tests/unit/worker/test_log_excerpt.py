"""The worker log excerpt in integration tests' failure messages keeps a crash's
traceback that scrolled out of the tail."""

from __future__ import annotations

from tests.integration.worker_harness import log_excerpt


def test_an_early_traceback_is_kept_before_the_tail() -> None:
    crash = "Traceback (most recent call last):\n  File 'x.py'\nKeyError: 'boom'\n"
    text = "start\n" + crash + "noise\n" * 1000 + "the end"
    excerpt = log_excerpt(text, tail=100)
    assert "KeyError: 'boom'" in excerpt
    assert excerpt.endswith(text[-100:])


def test_without_an_early_traceback_the_tail_alone() -> None:
    text = "line\n" * 1000
    assert log_excerpt(text, tail=100) == text[-100:]
    late = "x" * 500 + "Traceback (most recent call last):\nValueError\n"
    assert log_excerpt(late, tail=100) == late[-100:]

"""A cancellation that Python 3.11's `asyncio.wait_for` lost.

When the awaited coroutine finishes in the same loop turn as the caller is cancelled,
3.11's `wait_for` returns its result (or raises its error) instead of `CancelledError`;
the task still counts the request in `cancelling()`. A retry loop that catches the
error would then run on for ever, and `close()`, which waits for it, would never return.
"""

from __future__ import annotations

import asyncio


def raise_if_cancelling() -> None:
    """Raise `CancelledError` if the current task was asked to stop and has not yet."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError

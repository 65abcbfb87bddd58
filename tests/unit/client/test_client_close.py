"""`close()` ends the client's link to Kafka, whenever it comes, and never waits for ever.

No broker is needed: nothing listens at the client's address.
"""

from __future__ import annotations

import asyncio
import logging

import pytest
from aiokafka.errors import KafkaConnectionError

from loopwatch.streams.client import LoopwatchClient
from loopwatch.streams.client import client as client_module
from loopwatch.streams.demo.ports import free_ports


def down_client(**options: float) -> LoopwatchClient:
    return LoopwatchClient(
        bootstrap_servers=f"127.0.0.1:{free_ports()}", probe_interval=0.05, **options
    )


async def test_a_cancel_that_comes_as_a_connection_attempt_fails_stops_the_link() -> None:
    """Python 3.11's `wait_for` hands back the attempt's error instead of the cancel when
    both come in one loop turn; the link must stop all the same, not retry for ever."""
    client = down_client()
    attempts = 0

    async def attempt_cancelled_as_it_fails() -> None:
        nonlocal attempts
        attempts += 1
        linking = client._linking
        assert linking is not None
        asyncio.get_running_loop().call_soon(linking.cancel)  # before wait_for sees the error
        raise KafkaConnectionError("refused")

    client._link._connect_once = attempt_cancelled_as_it_fails  # type: ignore[method-assign]
    await client.start()
    linking = client._linking
    assert linking is not None
    done, _ = await asyncio.wait({linking}, timeout=10)
    assert linking in done and linking.cancelled()
    assert attempts == 1
    await client.close()


async def test_close_returns_when_the_link_will_not_stop(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(client_module, "LINK_STOP_GRACE", 0.0)
    client = down_client(close_timeout=0.2)
    released = asyncio.Event()

    async def stubborn_link() -> None:
        while not released.is_set():
            try:
                await released.wait()
            except asyncio.CancelledError:
                continue  # what a swallowed cancel looks like from outside

    client._link.run = stubborn_link  # type: ignore[method-assign]
    await client.start()
    with caplog.at_level(logging.WARNING, logger=client_module.__name__):
        await asyncio.wait_for(client.close(), timeout=10)
    assert "did not stop within 0.2s" in caplog.text
    released.set()
    linking = client._linking
    assert linking is not None
    await linking


async def test_close_at_any_moment_of_the_retries_ends_the_link() -> None:
    """Closed at spread-out moments of connect, fail, explain and sleep: every close
    returns and leaves no link task running."""
    for delay in (0.0, 0.01, 0.03, 0.07, 0.12, 0.2):
        client = down_client()
        await client.start()
        await asyncio.sleep(delay)
        await asyncio.wait_for(client.close(), timeout=20)
        linking = client._linking
        assert linking is not None and linking.done()

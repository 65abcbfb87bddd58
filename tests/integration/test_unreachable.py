"""No broker at the configured address: one clear error, naming it and the way out."""

from __future__ import annotations

import pytest

from loopwatch.streams.kafka.admin import BrokerUnreachable, wait_for_broker
from loopwatch.streams.settings import Settings

# nothing listens on port 1 of the loopback interface
NOWHERE = "127.0.0.1:1"


async def test_wait_for_broker_gives_up_at_the_deadline_with_a_clear_message() -> None:
    settings = Settings.from_env({"KAFKA_BOOTSTRAP_SERVERS": NOWHERE})

    with pytest.raises(BrokerUnreachable) as raised:
        await wait_for_broker(settings, timeout=1.0)

    message = str(raised.value)
    assert NOWHERE in message
    assert "make kafka-up" in message
    assert "KAFKA_BOOTSTRAP_SERVERS" in message

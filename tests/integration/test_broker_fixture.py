"""The broker fixture's policy, and the readiness probe kafka.sh relies on."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.kafka_broker import KAFKA_SH, no_broker

PROBE = KAFKA_SH.parent / "probe.py"


def test_missing_broker_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="no Kafka broker for the tests: java"):
        no_broker("java not found")


def test_missing_broker_skips_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="set KAFKA_BOOTSTRAP_SERVERS"):
        no_broker("java not found")


def probe(address: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(PROBE), address, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.kafka
def test_probe_sees_a_serving_broker(kafka_bootstrap: str) -> None:
    first = kafka_bootstrap.partition(",")[0]
    assert probe(first).returncode == 0


def test_probe_gives_up_at_its_deadline_when_nothing_listens() -> None:
    result = probe("127.0.0.1:1", "--deadline", "0.5")
    assert result.returncode == 1
    assert "127.0.0.1:1 not ready" in result.stderr

"""loopwatch against a broker that demands authentication and TLS (`kafka.sh --secure`):
the worker and a runtime's client end to end over SASL_SSL/SCRAM-SHA-512 and over mTLS,
and every refused credential or certificate stopping a component within 10 s with one
line that names the setting. No secret in the logs, /ready or /metrics.

The fixture starts the secured broker (ports 9192-9194, its own data directory) if it is
not up, and stops it at the end if it started it; under CI=true a broker that cannot be
had fails the tests, never skips them."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from loopwatch.streams.client import LoopwatchClient
from loopwatch.streams.demo.conversation import Conversation
from loopwatch.streams.demo.loopers import failing_edit
from tests.integration.secured import cli_env, page
from tests.integration.worker_harness import REPO_ROOT, WorkerEnv, WorkerProcess
from tests.support.kafka_broker import SecureBroker

pytestmark = pytest.mark.kafka

REFUSED_WITHIN_SECONDS = 10.0
"""The issue's bound: a refused credential stops a component within this, as a deadline."""
VERDICT_TIMEOUT = 120.0  # a wait returns on its verdict; this only bounds a broken run


@pytest.mark.parametrize("kind", ["sasl", "mtls"])
async def test_a_looping_session_gets_its_warning_over_the_secured_broker(
    secure_broker: SecureBroker, kind: str, tmp_path: Path
) -> None:
    credentials = secure_broker.env("admin", kind)
    env = WorkerEnv.unique(credentials["KAFKA_BOOTSTRAP_SERVERS"], extra=tuple(credentials.items()))
    await env.create_topics()
    worker = WorkerProcess(env, tmp_path)
    try:
        async with LoopwatchClient.from_settings(
            env.settings(), verdict_timeout=VERDICT_TIMEOUT
        ) as client:
            session = await client.open_session(f"secured-{kind}")
            outcome = await failing_edit(Conversation(session, "openai"))
            await session.end()
        assert outcome.warned_after == 2, worker.log_excerpt()
        assert client.stats.warnings["repeated_failed_mutation"] >= 1
        ready = page(worker.url + "/ready")
        metrics = page(worker.url + "/metrics")
        assert metrics[0] == 200 and "loopwatch_" in metrics[1]  # a real page, not empty
    finally:
        worker.stop()
    secret = secure_broker.password("admin")
    for shown in (worker.log(), str(ready), str(metrics)):
        assert secret not in shown


def _bad_cases(broker: SecureBroker) -> dict[str, tuple[dict[str, str], str]]:
    """name → (client settings, a word the one-line message must hold)."""
    sasl, mtls = broker.env("runtime", "sasl"), broker.env("runtime", "mtls")
    return {
        "wrong password": (
            {**sasl, "KAFKA_SASL_PASSWORD": "not-the-password"},
            "KAFKA_SASL_PASSWORD",
        ),
        "unknown user": ({**sasl, "KAFKA_SASL_USERNAME": "nobody"}, "KAFKA_SASL_USERNAME=nobody"),
        "expired certificate": (
            {
                **mtls,
                "KAFKA_SSL_CERTFILE": str(broker.tls("expired.crt")),
                "KAFKA_SSL_KEYFILE": str(broker.tls("expired.key")),
            },
            "expired",
        ),
        "untrusted certificate": (
            {
                **mtls,
                "KAFKA_SSL_CERTFILE": str(broker.tls("untrusted.crt")),
                "KAFKA_SSL_KEYFILE": str(broker.tls("untrusted.key")),
            },
            "KAFKA_SSL_CERTFILE",
        ),
        "no client certificate": (
            {k: v for k, v in mtls.items() if k not in ("KAFKA_SSL_CERTFILE", "KAFKA_SSL_KEYFILE")},
            "KAFKA_SSL_CERTFILE",
        ),
        "untrusted broker": (
            {**sasl, "KAFKA_SSL_CAFILE": str(broker.tls("rogue-ca.crt"))},
            "KAFKA_SSL_CAFILE",
        ),
    }


BAD_CASES = [
    "wrong password",
    "unknown user",
    "expired certificate",
    "untrusted certificate",
    "no client certificate",
    "untrusted broker",
]


@pytest.mark.parametrize("case", BAD_CASES)
def test_topics_create_refused_in_one_line_within_10_s(
    secure_broker: SecureBroker, case: str
) -> None:
    settings, named = _bad_cases(secure_broker)[case]
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "loopwatch.streams.cli", "topics", "create"],
        env=cli_env(settings),
        capture_output=True,
        text=True,
        timeout=REFUSED_WITHIN_SECONDS,  # the deadline: a hang fails here
        check=False,
        cwd=REPO_ROOT,
    )
    output = done.stdout + done.stderr
    assert done.returncode != 0, output
    assert len(done.stderr.strip().splitlines()) == 1, output
    assert named in done.stderr and "Traceback" not in output
    assert time.monotonic() - started < REFUSED_WITHIN_SECONDS
    for user in ("runtime", "admin"):
        assert secure_broker.password(user) not in output


@pytest.mark.parametrize("case", ["wrong password", "untrusted certificate"])
def test_the_worker_refused_exits_with_one_line_within_10_s(
    secure_broker: SecureBroker, case: str, tmp_path: Path
) -> None:
    settings, named = _bad_cases(secure_broker)[case]
    env = WorkerEnv.unique(settings["KAFKA_BOOTSTRAP_SERVERS"], extra=tuple(settings.items()))
    worker = WorkerProcess(env, tmp_path)
    try:
        code = worker.proc.wait(timeout=REFUSED_WITHIN_SECONDS)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the worker did not exit within 10 s; log:\n{worker.log_excerpt()}")
    finally:
        worker.stop()  # reaps it and closes its log
    log = worker.log()
    assert code != 0, log
    errors = [line for line in log.splitlines() if named in line]
    assert len(errors) == 1 and "Traceback" not in log, log
    assert "not-the-password" not in log and secure_broker.password("runtime") not in log

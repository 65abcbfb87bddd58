"""Every other component on the secured broker, over SASL_SSL/SCRAM and over mTLS:
`topics`, `policy`, `dashboard`, `demo --bootstrap` (the otel-bridge: test_secured_acls);
the client's one fail-open line for a refused login or a missing right; and no password
in any log, page or `--help` of a secured run."""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from loopwatch.streams.client import LoopwatchClient
from loopwatch.streams.demo.ports import free_ports
from loopwatch.streams.settings import Settings
from tests.integration.secured import REFUSED_WITHIN_SECONDS, Deployment, cli_env, page, run_cli
from tests.integration.worker_harness import REPO_ROOT, WorkerProcess
from tests.support.kafka_broker import SecureBroker

pytestmark = pytest.mark.kafka

KINDS = ["sasl", "mtls"]
TOKEN = "secured-run-dashboard-token"
PAGE_DEADLINE_SECONDS = 60.0


class Dashboard:
    """`loopwatch dashboard` as a child process, on a free port."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.port = free_ports()
        self.log_path = log
        self._log = log.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "loopwatch.streams.cli", "dashboard", "--port", str(self.port)],
            env=cli_env(env),
            stdout=self._log,
            stderr=subprocess.STDOUT,
            cwd=REPO_ROOT,
        )
        self.url = f"http://127.0.0.1:{self.port}/"

    def wait_serving(self) -> None:
        deadline = time.monotonic() + PAGE_DEADLINE_SECONDS
        while page(self.url)[0] == 0 and time.monotonic() < deadline:
            assert self.proc.poll() is None, self.output()
            time.sleep(0.2)  # polling the port inside a deadline

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=30)
        self._log.close()

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")


@pytest.mark.parametrize("kind", KINDS)
async def test_topics_and_policy_as_the_admin(secure_broker: SecureBroker, kind: str) -> None:
    deployment = await Deployment.make(secure_broker, kind)
    env = deployment.env.env(web_port=6066)
    created = run_cli(["topics", "create"], env)
    assert created.returncode == 0 and "exists" in created.stdout, created.stderr
    policy = '{"profile": "extended"}'
    done = subprocess.run(
        [sys.executable, "-m", "loopwatch.streams.cli", "policy", "set", "agent-x", "-"],
        input=policy,
        env=cli_env(env),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=REPO_ROOT,
    )
    assert done.returncode == 0, done.stderr
    listed = run_cli(["policy", "list"], env)
    assert listed.returncode == 0 and "agent-x" in listed.stdout, listed.stderr
    secret = secure_broker.password("admin")
    for output in (created, done, listed):
        assert secret not in output.stdout + output.stderr


@pytest.mark.parametrize("kind", KINDS)
async def test_the_dashboard_command_serves_with_only_its_rights(
    secure_broker: SecureBroker, kind: str, tmp_path: Path
) -> None:
    deployment = await Deployment.make(secure_broker, kind)
    deployment.grant("dashboard")
    env = {**deployment.as_user("dashboard").env(web_port=6066), "LOOPWATCH_DASHBOARD_TOKEN": TOKEN}
    dashboard = Dashboard(env, tmp_path / "dashboard.log")
    try:
        dashboard.wait_serving()
        status, body = page(dashboard.url + "snapshot.json", TOKEN)
        assert status == 200, dashboard.output()
        assert json.loads(body)["topics"]["warnings"] == deployment.env.warnings
        assert page(dashboard.url + "snapshot.json")[0] == 401
    finally:
        dashboard.stop()
    output = dashboard.output()
    assert "needs its token" in output and TOKEN not in output
    assert secure_broker.password("dashboard") not in output


@pytest.mark.parametrize("kind", KINDS)
def test_the_demo_runs_on_the_secured_broker(
    secure_broker: SecureBroker, kind: str, tmp_path: Path
) -> None:
    admin = secure_broker.env("admin", kind)
    bootstrap = admin.pop("KAFKA_BOOTSTRAP_SERVERS")
    empty = tmp_path / "no-trajectories"
    empty.mkdir()
    done = run_cli(
        ["demo", "--bootstrap", bootstrap, "--trajectories", str(empty), "--dashboard-port", "0"],
        admin,
        timeout=300,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "loops broken    7 of 7" in output and "removed the demo's" in output
    assert secure_broker.password("admin") not in output


@pytest.mark.parametrize("case", ["wrong password", "missing right"])
async def test_the_client_stays_fail_open_with_one_line_naming_the_cause(
    secure_broker: SecureBroker, case: str, caplog: pytest.LogCaptureFixture
) -> None:
    deployment = await Deployment.make(secure_broker)
    settings = deployment.settings("runtime")  # no right granted on these names
    named = "lacks WRITE on topic"
    if case == "wrong password":
        env = {**deployment.as_user("runtime").env(web_port=6066), "KAFKA_SASL_PASSWORD": "nope"}
        settings = Settings.from_env(env)
        named = "wrong password"
    started = time.monotonic()
    with caplog.at_level(logging.INFO):
        async with LoopwatchClient.from_settings(
            # a high threshold: the circuit stays closed, so every retry is counted
            settings,
            verdict_timeout=1.0,
            probe_interval=0.5,
            failure_threshold=1000,
        ) as client:
            session = await client.open_session("fail-open")
            await session.user("hello")
            deadline = started + REFUSED_WITHIN_SECONDS
            while not [r for r in caplog.records if named in r.getMessage()]:
                assert time.monotonic() < deadline, caplog.text
                assert not await client.connect(timeout=0.2)  # False while it cannot
            # a few more retries: each would have logged again
            while client.stats.circuit.consecutive_failures < 6:
                assert time.monotonic() < deadline + 10, caplog.text
                assert not await client.connect(timeout=0.2)
            wait = await session.verdicts()  # fail-open: returns, never raises
            assert not wait.complete
    lines = [r.getMessage() for r in caplog.records if named in r.getMessage()]
    assert len(lines) == 1, caplog.text
    assert "loopwatch acls" in lines[0] or "KAFKA_SASL_PASSWORD" in lines[0]
    noisy = [
        r for r in caplog.records if r.name.startswith("aiokafka") and r.levelno >= logging.WARNING
    ]
    assert noisy == []
    assert secure_broker.password("runtime") not in caplog.text and "nope" not in caplog.text


async def test_no_secret_in_any_log_page_or_help_of_a_secured_run(
    secure_broker: SecureBroker,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LW_TEST_LOGLEVEL", "debug")  # the worker's and bridge's logs: all
    deployment = await Deployment.make(secure_broker)
    deployment.grant("worker", "runtime", "dashboard", "bridge")
    worker = WorkerProcess(deployment.as_user("worker"), tmp_path, name="worker")
    bridge = WorkerProcess(
        deployment.as_user("bridge"), tmp_path, name="bridge", command="otel-bridge"
    )
    dashboard_env = {
        **deployment.as_user("dashboard").env(web_port=6066),
        "LOOPWATCH_DASHBOARD_TOKEN": TOKEN,
    }
    dashboard = Dashboard(dashboard_env, tmp_path / "dashboard.log")
    shown: dict[str, str] = {}
    try:
        with caplog.at_level(logging.DEBUG):
            async with LoopwatchClient.from_settings(
                deployment.settings("runtime"), verdict_timeout=60.0
            ) as client:
                session = await client.open_session("no-secrets")
                await session.user("hello")
                assert (await session.verdicts()).complete, worker.log_excerpt()
                await session.end()
        dashboard.wait_serving()
        # the bridge serves /metrics only
        for name, process, path in (
            ("worker", worker, "/ready"),
            ("worker", worker, "/metrics"),
            ("bridge", bridge, "/metrics"),
        ):
            status, body = page(process.url + path)
            assert status in (200, 503), f"{name}{path}: {status}"
            shown[f"{name} {path}"] = body
        for path in ("", "snapshot.json", "static/page.js"):
            status, body = page(dashboard.url + path, TOKEN)
            assert status == 200
            shown[f"dashboard /{path}"] = body
    finally:
        worker.stop()
        bridge.stop()
        dashboard.stop()
    shown.update(worker=worker.log(), bridge=bridge.log(), dashboard=dashboard.output())
    shown["client"] = caplog.text
    everyone = deployment.env.env(web_port=6066)  # the admin's password, in the environment
    for command in ("", "worker", "topics", "dashboard", "policy", "otel-bridge", "demo", "acls"):
        help_run = run_cli([*command.split(), "--help"], everyone)
        assert help_run.returncode == 0
        shown[f"{command} --help"] = help_run.stdout + help_run.stderr
    # the pages are real, not empty
    assert "loopwatch_" in shown["worker /metrics"] and "loopwatch_" in shown["bridge /metrics"]
    secrets = [
        secure_broker.password(user)
        for user in ("admin", "worker", "runtime", "dashboard", "bridge")
    ]
    leaks = [
        (where, text.count(secret))
        for where, text in shown.items()
        for secret in secrets
        if secret in text
    ]
    assert leaks == [] and TOKEN not in "".join(shown.values())


async def test_the_dashboard_without_its_rights_stops_in_one_line_within_10_s(
    secure_broker: SecureBroker,
) -> None:
    deployment = await Deployment.make(secure_broker)  # nothing granted to `dashboard`
    env = deployment.as_user("dashboard").env(web_port=6066)
    started = time.monotonic()
    done = run_cli(["dashboard", "--port", str(free_ports())], env, timeout=REFUSED_WITHIN_SECONDS)
    assert time.monotonic() - started < REFUSED_WITHIN_SECONDS
    lines = done.stderr.strip().splitlines()
    assert done.returncode != 0 and len(lines) == 1, done.stdout + done.stderr
    assert f"lacks READ on topic {deployment.env.warnings}" in lines[0]
    assert "loopwatch acls --role dashboard" in lines[0]

"""`loopwatch worker` as a child process, for the demo and the end-to-end tests.

Readiness is observed, not guessed: the worker's `/ready` page (streams.worker.readiness)
answers 200 once it has its partitions, its table is recovered and the broker is
reachable.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import IO

from pydantic import SecretStr

from loopwatch.streams.settings import ENVIRONMENT, Settings

_READY_POLL_SECONDS = 0.25  # how often the readiness wait asks /ready (and the exit status)


def _answers_ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as page:
            return bool(page.status == 200)
    except (OSError, ValueError):  # not serving yet, 503 (HTTPError), or cut short
        return False


class WorkerFailed(RuntimeError):
    """The worker exited or never became ready; the message points at its log."""


def settings_env(settings: Settings) -> dict[str, str]:
    """The environment variables that give a child process these settings."""
    env = {}
    for field, (name, _) in ENVIRONMENT.items():
        value = getattr(settings, field)
        if value is None:
            continue
        env[name] = value.get_secret_value() if isinstance(value, SecretStr) else str(value)
    return env


class WorkerProcess:
    """One `loopwatch worker` child; its output goes to `log_path`."""

    def __init__(self, settings: Settings, log_path: Path, loglevel: str = "warning") -> None:
        self.settings = settings
        self.log_path = log_path
        self.loglevel = loglevel
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    def start(self) -> None:
        env = {**os.environ, **settings_env(self.settings)}
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("ab")
        self._process = subprocess.Popen(
            [sys.executable, "-m", "loopwatch.streams.cli", "worker", "--loglevel", self.loglevel],
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            # its own process group: a Ctrl-C at the terminal is ours to pass on, in order
            start_new_session=True,
        )

    def exit_code(self) -> int | None:
        return None if self._process is None else self._process.poll()

    async def wait_ready(self, timeout: float) -> float:
        """Seconds until the worker's `/ready` answered 200; WorkerFailed otherwise."""
        started = time.monotonic()
        deadline = started + timeout
        host = self.settings.web_host
        host = "127.0.0.1" if host in ("0.0.0.0", "") else host  # bound to all: ask locally
        url = f"http://{host}:{self.settings.web_port}/ready"
        while time.monotonic() < deadline:
            if self.exit_code() is not None:
                raise WorkerFailed(
                    f"the worker exited with code {self.exit_code()}; see {self.log_path}"
                )
            if await asyncio.to_thread(_answers_ready, url):
                return time.monotonic() - started
            await asyncio.sleep(_READY_POLL_SECONDS)  # polling the probe against a deadline
        raise WorkerFailed(f"the worker was not ready within {timeout:.0f}s; see {self.log_path}")

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM, wait for a clean exit (SIGKILL after `timeout`); the exit code."""
        process = self._process
        if process is None:
            return None
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._log is not None:
            self._log.close()
        return process.returncode

    def detach(self) -> None:
        """Leave the worker running after this process exits (`--keep-worker`)."""
        if self._log is not None:
            self._log.close()
        self._process = None


async def start_worker(settings: Settings, log_path: Path, timeout: float = 90.0) -> WorkerProcess:
    """Start a worker and wait until it answers; stops it again when it does not."""
    worker = WorkerProcess(settings, log_path)
    worker.start()
    try:
        await worker.wait_ready(timeout)
    except BaseException:
        await asyncio.to_thread(worker.stop)
        raise
    return worker

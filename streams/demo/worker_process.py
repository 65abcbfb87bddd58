"""`loopwatch worker` (or another long-running command) as a child process: the one way
the demo, the end-to-end and integration tests and the benches start one.

Readiness is observed, not guessed: the worker's `/ready` page (streams.worker.readiness)
answers 200 once it has its partitions, its table is recovered and the broker is
reachable.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from pydantic import SecretStr

from loopwatch.streams.settings import ENVIRONMENT, Settings

_READY_POLL_SECONDS = 0.25  # how often the readiness wait asks /ready (and the exit status)
CLI_MODULE = "loopwatch.streams.cli"


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
    """One `loopwatch <command>` child (`worker` by default); its output is appended to
    `log_path`.

    Its environment is `env` (default: this process's) with `settings` on top; it answers
    `/ready` on the settings' web port. `interpreter` runs `-m module command`: a
    profiler or a sampler can wrap the Python interpreter there; `module` lets a bench
    run an older checkout's CLI, `cwd` is where the child runs.
    """

    def __init__(
        self,
        settings: Settings,
        log_path: Path,
        loglevel: str = "warning",
        *,
        command: str = "worker",
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        interpreter: Sequence[str] = (sys.executable,),
        module: str = CLI_MODULE,
    ) -> None:
        self.settings = settings
        self.log_path = log_path
        self.loglevel = loglevel
        self.command = command
        self.env = dict(os.environ if env is None else env)
        self.cwd = cwd
        self.argv = [*interpreter, "-m", module, command, "--loglevel", loglevel]
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    @property
    def url(self) -> str:
        host = self.settings.web_host
        host = "127.0.0.1" if host in ("0.0.0.0", "") else host  # bound to all: ask locally
        return f"http://{host}:{self.settings.web_port}"

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("ab")
        self._process = subprocess.Popen(
            self.argv,
            env={**self.env, **settings_env(self.settings)},
            cwd=self.cwd,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            # its own process group: a Ctrl-C at the terminal is ours to pass on, in order
            start_new_session=True,
        )

    def exit_code(self) -> int | None:
        return None if self._process is None else self._process.poll()

    def get(self, path: str) -> tuple[int, Any]:
        """(HTTP status, JSON body) of a page on the worker's web port; (0, None) while
        nothing answers."""
        try:
            with urllib.request.urlopen(self.url + path, timeout=5) as page:
                return page.status, json.loads(page.read())
        except urllib.error.HTTPError as error:  # 503 while not ready: its body says why
            try:
                return error.code, json.loads(error.read())
            except ValueError:
                return error.code, None
        except (OSError, ValueError):  # not serving yet, or cut short
            return 0, None

    def failed(self, message: str) -> WorkerFailed:
        """The error for `message`, pointing at the log (the test harness shows it)."""
        return WorkerFailed(f"{message}; see {self.log_path}")

    def _ready_document(self, started: float, timeout: float) -> dict[str, Any] | None:
        """`/ready`'s document once it answers 200, None before; WorkerFailed once the
        worker exited or `timeout` seconds from `started` (monotonic) passed."""
        if self.exit_code() is not None:
            raise self.failed(f"the {self.command} exited with code {self.exit_code()}")
        status, document = self.get("/ready")
        if status == 200:
            return dict(document or {})
        if time.monotonic() > started + timeout:
            raise self.failed(f"the {self.command} was not ready within {timeout:.0f}s")
        return None

    async def wait_ready(self, timeout: float) -> float:
        """Seconds until the worker's `/ready` answered 200; WorkerFailed otherwise."""
        started = time.monotonic()
        while await asyncio.to_thread(self._ready_document, started, timeout) is None:
            await asyncio.sleep(_READY_POLL_SECONDS)  # polling the probe against a deadline
        return time.monotonic() - started

    def wait_ready_blocking(self, timeout: float = 90.0) -> dict[str, Any]:
        """`/ready`'s document once it answered 200 (for callers without an event loop);
        WorkerFailed otherwise."""
        started = time.monotonic()
        while (document := self._ready_document(started, timeout)) is None:
            time.sleep(_READY_POLL_SECONDS)  # polling the probe against a deadline
        return document

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int | None:
        """`sig` (SIGKILL: no goodbye to the group, no flush), wait for the exit (SIGKILL
        after `timeout`); the exit code."""
        process = self._process
        if process is None:
            return None
        if process.poll() is None:
            process.send_signal(sig)
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

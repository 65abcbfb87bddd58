"""The framework examples (docs/frameworks.md) run as a user runs them, against the real
broker and worker, and their model is told about the loop."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from loopwatch.streams.client import MARKER
from loopwatch.streams.demo.ports import free_ports
from loopwatch.streams.demo.worker_process import WorkerProcess, settings_env
from loopwatch.streams.settings import Settings

pytestmark = pytest.mark.kafka

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
FRAMEWORK_EXAMPLES = (
    "claude_agent_hooks.py",
    "langchain_agent.py",
    "openai_agents_agent.py",
    "pydantic_ai_agent.py",
)


async def run_example(name: str, settings: Settings) -> str:
    """The example's output; it must exit 0."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(EXAMPLES / name),
        env={**os.environ, **settings_env(settings), "PYTHONPATH": str(EXAMPLES.parent)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    assert process.stdout is not None
    reading = asyncio.ensure_future(process.stdout.read())  # never cancelled: kept whole
    try:
        await asyncio.wait_for(process.wait(), timeout=240)
    except TimeoutError:
        process.kill()  # what it printed until then says where it hung
        await process.wait()
        hung = (await reading).decode()
        raise AssertionError(f"{name} did not finish within 240 s:\n{hung}") from None
    output = await reading
    assert process.returncode == 0, output.decode()
    return output.decode()


async def test_every_example_shows_its_model_the_warning(
    worker: WorkerProcess, e2e_settings: Settings
) -> None:
    for name in FRAMEWORK_EXAMPLES:
        output = await run_example(name, e2e_settings)
        assert MARKER in output and "repeated_" in output, f"{name}:\n{output}"


async def test_every_example_finishes_its_run_without_a_worker(e2e_settings: Settings) -> None:
    """Fail-open: the verdicts never come; the agents run to their end all the same."""
    for name in FRAMEWORK_EXAMPLES:
        output = await run_example(name, e2e_settings)
        assert "Traceback" not in output and "circuit open" in output, f"{name}:\n{output}"


async def test_every_example_finishes_its_run_with_the_broker_down(
    e2e_settings: Settings,
) -> None:
    """Fail-open: nothing listens at the bootstrap address; nothing raises into the agent."""
    down = e2e_settings.model_copy(update={"bootstrap_servers": f"127.0.0.1:{free_ports()}"})
    for name in FRAMEWORK_EXAMPLES:
        output = await run_example(name, down)
        assert "Traceback" not in output and "Unclosed" not in output, f"{name}:\n{output}"
        assert "cannot connect to Kafka" in output, f"{name}:\n{output}"

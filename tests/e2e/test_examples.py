"""The framework examples (docs/frameworks.md) run as a user runs them, against the real
broker and worker, and their model is told about the loop."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from loopwatch.streams.client import MARKER
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
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(EXAMPLES / name),
        env={**os.environ, **settings_env(settings), "PYTHONPATH": str(EXAMPLES.parent)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await asyncio.wait_for(process.communicate(), timeout=240)
    assert process.returncode == 0, output.decode()
    return output.decode()


async def test_every_example_shows_its_model_the_warning(
    worker: WorkerProcess, e2e_settings: Settings
) -> None:
    for name in FRAMEWORK_EXAMPLES:
        output = await run_example(name, e2e_settings)
        assert MARKER in output and "repeated_" in output, f"{name}:\n{output}"

"""The README cannot drift: every shell block in it is run here, against the real broker,
or says why it is not.

A fenced block whose language is `sh` (or `bash`, `console`, `shell`) must be preceded by
`<!-- doctest: run -->` (optionally `<!-- doctest: run, timeout=N -->`) or by
`<!-- doctest: skip: <reason> -->`. A `run` block is executed with bash (`set -euo
pipefail`) from the repository root, with the venv's bin first on PATH and the test broker
in KAFKA_BOOTSTRAP_SERVERS; it must exit 0. Commands must not hide in indented blocks.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
SHELL_LANGUAGES = {"sh", "bash", "console", "shell"}
MARKER = re.compile(r"<!--\s*doctest:\s*(run(?:,\s*timeout=(\d+))?|skip:\s*(.+?))\s*-->")
COMMAND_WORDS = ("make ", "loopwatch ", "docker ", "pip ", "python ")
DEFAULT_TIMEOUT = 300


@dataclass(frozen=True)
class Block:
    line: int
    """Line number of the opening fence."""
    language: str
    code: str
    marker: str | None
    """`run`, `skip: reason`, or None when the marker is missing."""
    timeout: int


def shell_blocks(text: str) -> list[Block]:
    blocks = []
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        fence = re.match(r"^```(\w*)", lines[index])
        if fence is None:
            index += 1
            continue
        start, language = index, fence.group(1)
        end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("```"))
        if language in SHELL_LANGUAGES:
            previous = [line for line in lines[max(0, start - 3) : start] if line.strip()]
            found = MARKER.search(previous[-1]) if previous else None
            blocks.append(
                Block(
                    line=start + 1,
                    language=language,
                    code="\n".join(lines[start + 1 : end]),
                    marker=None if found is None else found.group(1),
                    timeout=int(found.group(2)) if found and found.group(2) else DEFAULT_TIMEOUT,
                )
            )
        index = end + 1
    return blocks


def indented_commands(text: str) -> list[tuple[int, str]]:
    """Lines outside fences, indented as code, that start with a command."""
    found, in_fence = [], False
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("```"):
            in_fence = not in_fence
        elif not in_fence and line.startswith("    ") and line.strip().startswith(COMMAND_WORDS):
            found.append((number, line.strip()))
    return found


BLOCKS = shell_blocks(README.read_text(encoding="utf-8"))


def test_every_shell_block_says_whether_it_runs() -> None:
    assert BLOCKS, "the README has no shell blocks"
    unmarked = [block.line for block in BLOCKS if block.marker is None]
    assert not unmarked, (
        f"README.md shell blocks at lines {unmarked} lack <!-- doctest: run --> or "
        "<!-- doctest: skip: reason -->"
    )
    assert any(block.marker and block.marker.startswith("run") for block in BLOCKS)


def test_no_command_hides_in_an_indented_block() -> None:
    assert indented_commands(README.read_text(encoding="utf-8")) == []


RUN = [block for block in BLOCKS if block.marker and block.marker.startswith("run")]


@pytest.mark.kafka
@pytest.mark.parametrize(
    "block", RUN, ids=[f"line{b.line}-{b.code.split()[0] if b.code.split() else ''}" for b in RUN]
)
def test_readme_block_runs(block: Block, kafka_bootstrap: str, tmp_path: Path) -> None:
    venv_bin = Path(sys.executable).parent
    env = {
        **os.environ,
        "PATH": f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}",
        "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "TMPDIR": str(tmp_path),
    }
    script = "set -euo pipefail\n" + block.code
    completed = subprocess.run(
        ["bash", "-c", script],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=block.timeout,
        check=False,
    )
    assert completed.returncode == 0, (
        f"README.md line {block.line} exited {completed.returncode}:\n{block.code}\n"
        f"--- stdout (tail)\n{completed.stdout[-3000:]}\n--- stderr (tail)\n"
        f"{completed.stderr[-3000:]}"
    )

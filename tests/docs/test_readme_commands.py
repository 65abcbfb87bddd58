"""The README cannot drift: every shell block in it is run here, against the real broker,
or says why it is not.

A fenced block whose language is `sh` (or `bash`, `console`, `shell`) must be preceded by
`<!-- doctest: run -->` or by `<!-- doctest: skip: <reason> -->`. A `run` block is executed
with bash (`set -euo pipefail`) from the repository root, with the venv's bin first on
PATH, the test broker in KAFKA_BOOTSTRAP_SERVERS and topic names of its own; it must exit
0. Options after `run`: `timeout=N` seconds; `interrupt-after="TEXT"` for a command that
serves until Ctrl-C: once TEXT is printed it gets SIGINT, and must then end by itself;
`expect="TEXT"`: the output must contain TEXT. Commands must not hide in indented blocks.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

from loopwatch.streams.demo.naming import demo_names, new_run_prefix

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
SHELL_LANGUAGES = {"sh", "bash", "console", "shell"}
MARKER = re.compile(r"<!--\s*doctest:\s*(run\b[^>]*?|skip:\s*(.+?))\s*-->")
OPTION = re.compile(r'(\w[\w-]*)=(?:"([^"]*)"|(\S+?))(?:,|$)')
COMMAND_WORDS = ("make ", "loopwatch ", "docker ", "pip ", "python ")
DEFAULT_TIMEOUT = 300


@dataclass(frozen=True)
class Block:
    line: int
    """Line number of the opening fence."""
    language: str
    code: str
    marker: str | None
    """`run ...`, `skip: reason`, or None when the marker is missing."""
    options: dict[str, str]
    """`timeout`, `interrupt-after`, `expect` of a `run` marker."""


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
                    options=_options(found.group(1)) if found else {},
                )
            )
        index = end + 1
    return blocks


def _options(marker: str) -> dict[str, str]:
    rest = marker.removeprefix("run").strip().lstrip(",").strip()
    return {m.group(1): m.group(2) or m.group(3) or "" for m in OPTION.finditer(rest)}


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
        **demo_names(new_run_prefix().replace("demo", "readme")),
        "PATH": f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}",
        "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "TMPDIR": str(tmp_path),
    }
    timeout = int(block.options.get("timeout", DEFAULT_TIMEOUT))
    process = subprocess.Popen(
        ["bash", "-c", "set -euo pipefail\n" + block.code],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group, for the interrupt
    )
    output = _run(process, timeout, block.options.get("interrupt-after"))
    where = f"README.md line {block.line}:\n{block.code}\n--- output (tail)\n{output[-4000:]}"
    if "interrupt-after" in block.options:
        assert block.options["interrupt-after"] in output, f"never printed the text; {where}"
    else:
        assert process.returncode == 0, f"exit {process.returncode}; {where}"
    if "expect" in block.options:
        assert block.options["expect"] in output, where


def _run(process: subprocess.Popen[str], timeout: float, interrupt_after: str | None) -> str:
    """All the output; SIGINT to the group once `interrupt_after` shows (then it must end
    by itself), SIGKILL at the deadline."""
    assert process.stdout is not None
    lines: list[str] = []
    done = threading.Event()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line)
            if interrupt_after is not None and interrupt_after in line:
                os.killpg(process.pid, signal.SIGINT)
        done.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        lines.append(f"\n[killed after {timeout} s]\n")
    done.wait(10)
    process.stdout.close()
    return "".join(lines)

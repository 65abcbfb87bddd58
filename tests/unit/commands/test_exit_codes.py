"""One table of exit codes for every command (issue 32): each code one meaning, printed by
`loopwatch --help` and listed in the README's reference section."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from loopwatch.streams.commands import exit_codes
from loopwatch.streams.commands.exit_codes import EXIT_CODES

README = Path(__file__).resolve().parents[3] / "README.md"


def test_every_code_has_one_name_and_one_meaning() -> None:
    named = {
        name: value
        for name, value in vars(exit_codes).items()
        if name.startswith("EXIT_") and isinstance(value, int)
    }
    assert len(set(named.values())) == len(named), named  # no code with two names
    assert sorted(code for code, _ in EXIT_CODES) == sorted(named.values())


def test_help_prints_the_table() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "loopwatch.streams.cli", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    for code, meaning in EXIT_CODES:
        assert re.search(rf"^ +{code}  {re.escape(meaning)}$", done.stdout, re.M), code


def test_the_readme_lists_every_code() -> None:
    reference = README.read_text().split("## Reference", 1)[1]
    rows = dict(re.findall(r"^\| (\d+) \| (.+) \|$", reference, re.M))
    assert sorted(map(int, rows)) == [code for code, _ in EXIT_CODES]

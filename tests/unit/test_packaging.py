"""pyproject lists every package by hand (package-dir maps them from models/ and streams/,
with no symlink): a new folder with an __init__.py must be listed, or the wheel lacks it."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_package_folder_is_listed_in_pyproject() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert config["package-dir"] == {"loopwatch.models": "models", "loopwatch.streams": "streams"}
    folders = {
        "loopwatch." + ".".join(init.parent.relative_to(ROOT).parts)
        for top in ("models", "streams")
        for init in (ROOT / top).rglob("__init__.py")
    }
    assert set(config["packages"]) == {"loopwatch"} | folders


def test_the_repository_holds_no_symlink() -> None:
    links = [
        p
        for top in ("loopwatch", "models", "streams", "ops", "examples", "docs")
        for p in (ROOT / top).rglob("*")
        if p.is_symlink()
    ]
    assert links == []

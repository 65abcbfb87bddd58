"""Where `../shared/` (beside the project's root) is, for tests that read it.

It exists on development machines and in CI, never in a user's clone: tests skip when it
is absent, except under CI=true, where its absence is a failure.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
SHARED = REPO_ROOT.parent / "shared"
TRAJECTORIES = SHARED / "data" / "trajectories"


def trajectory_files() -> list[Path]:
    """The shared trajectory files; skips (or fails under CI) when they are absent."""
    files = sorted(TRAJECTORIES.glob("*.jsonl")) if TRAJECTORIES.is_dir() else []
    if files:
        return files
    reason = f"no trajectories at {TRAJECTORIES} (../shared/ is absent in a user's clone)"
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"CI=true but {reason}")
    pytest.skip(reason)

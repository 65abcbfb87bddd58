"""The built wheel installs under `loopwatch` only: next to an application's own package
named `models`, both import (issue 11; pyproject's package-dir)."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str | Path, cwd: Path | None = None) -> str:
    done = subprocess.run(
        [str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, f"{args}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_the_wheel_claims_only_loopwatch_and_imports_beside_an_app_models(
    tmp_path: Path,
) -> None:
    # pip from PyPI's cache builds the wheel in isolation (setuptools from pyproject)
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", tmp_path / "dist", ROOT)
    (wheel,) = (tmp_path / "dist").glob("loopwatch-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names}
    assert "loopwatch" in tops
    assert not tops & {"models", "streams"}, sorted(tops)
    assert "loopwatch/models/fingerprint_vectors.json" in names
    assert "loopwatch/streams/client/tracker.py" in names

    fresh = tmp_path / "venv"
    venv.create(fresh, with_pip=True)
    python = fresh / "bin" / "python"
    run(python, "-m", "pip", "install", "-q", "--no-deps", wheel)
    # dependencies from this test's environment, without its editable loopwatch
    site = Path(run(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))").strip())
    (site / "deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    app = tmp_path / "app"
    (app / "models").mkdir(parents=True)
    (app / "models" / "__init__.py").write_text('WHOSE = "the application"\n')
    out = run(
        python,
        "-c",
        # the application's own `models` first on sys.path, then ours from site-packages
        "import models as app_models, loopwatch.models, loopwatch.streams.client;"
        "import loopwatch.streams.cli;"
        "print(app_models.WHOSE);"
        "print(loopwatch.models.call_fingerprint('bash', {'cmd': 'cargo test'}))",
        cwd=app,
    )
    assert out.splitlines() == [
        "the application",
        "sha256:40d39e472be6e5bd359976a905c732cbce4beeaade5d408b7c63fc27a79fb640",
    ]
    version = run(fresh / "bin" / "loopwatch", "--version", cwd=app)
    assert version.startswith("loopwatch ")

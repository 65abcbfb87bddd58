"""The sdist and the wheels build everywhere and install as a user would (issues 11, 28).

One `python -m build` makes the sdist and a wheel from the tree; a second wheel is built
from the unpacked sdist (what `pip install loopwatch-X.tar.gz` does). Each holds every
module, the `py.typed` markers and the static assets under `loopwatch` only, the sdist
holds no symlink, and twine accepts both. Fresh venvs then install them from the
package index: the base install runs `--version`, `scan` and `report` with no faust;
the `worker` extra starts a worker against the real broker.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tarfile
import venv
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from loopwatch.streams.demo.ports import free_ports
from loopwatch.streams.demo.worker_process import WorkerProcess
from loopwatch.streams.settings import Settings
from tests.integration.worker_harness import WorkerEnv

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def run(*args: str | Path, cwd: Path | None = None, timeout: float = 900) -> str:
    done = subprocess.run(
        [str(a) for a in args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        # nothing of this checkout leaks in through the environment
        env={k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")},
    )
    assert done.returncode == 0, f"{args}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def sources() -> set[str]:
    """What every wheel must hold: each source file of the repository's packages, at its
    installed name."""
    wanted = {"loopwatch/__init__.py", "loopwatch/py.typed"}
    for folder in ("models", "streams"):
        for path in (ROOT / folder).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts:
                wanted.add(f"loopwatch/{path.relative_to(ROOT).as_posix()}")
    return wanted


@dataclass(frozen=True)
class Dists:
    sdist: Path
    wheel: Path  # built from the tree
    wheel_from_sdist: Path


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> Dists:
    out = tmp_path_factory.mktemp("dist")
    # the build backend (setuptools, from pyproject) in an isolated environment
    run(sys.executable, "-m", "build", "--outdir", out / "tree", ROOT)
    (sdist,) = (out / "tree").glob("loopwatch-*.tar.gz")
    (wheel,) = (out / "tree").glob("loopwatch-*.whl")
    unpacked = out / "unpacked"
    with tarfile.open(sdist) as tar:
        tar.extractall(unpacked, filter="data")
    (tree,) = unpacked.iterdir()
    run(sys.executable, "-m", "build", "--wheel", "--outdir", out / "from-sdist", tree)
    (from_sdist,) = (out / "from-sdist").glob("loopwatch-*.whl")
    return Dists(sdist, wheel, from_sdist)


def test_the_sdist_has_no_symlink_and_the_license(dists: Dists) -> None:
    with tarfile.open(dists.sdist) as tar:
        members = tar.getmembers()
    links = [m.name for m in members if m.issym() or m.islnk()]
    assert links == []
    names = {m.name.split("/", 1)[1] for m in members if "/" in m.name}
    assert {"LICENSE", "README.md", "pyproject.toml", "loopwatch/__init__.py"} <= names
    assert "models/fingerprint_vectors.json" in names
    assert "streams/fleetview/static/index.html" in names


@pytest.mark.parametrize("which", ["wheel", "wheel_from_sdist"])
def test_each_wheel_holds_every_module_under_loopwatch_only(dists: Dists, which: str) -> None:
    wheel: Path = getattr(dists, which)
    names = set(zipfile.ZipFile(wheel).namelist())
    tops = {name.split("/")[0] for name in names}
    assert tops == {"loopwatch", "loopwatch-0.1.0.dist-info"}, sorted(tops)
    missing = sources() - names
    assert not missing, sorted(missing)
    assert "loopwatch-0.1.0.dist-info/licenses/LICENSE" in names


def test_twine_accepts_the_release_metadata(dists: Dists) -> None:
    out = run(sys.executable, "-m", "twine", "check", "--strict", dists.sdist, dists.wheel)
    assert out.count("PASSED") == 2, out
    metadata = zipfile.ZipFile(dists.wheel).read("loopwatch-0.1.0.dist-info/METADATA").decode()
    assert "License-Expression: MIT" in metadata
    assert "Project-URL: Source" in metadata
    assert "Classifier: Typing :: Typed" in metadata
    assert "Description-Content-Type: text/markdown" in metadata


def fresh_venv(path: Path) -> Path:
    venv.create(path, with_pip=True)
    return path / "bin" / "python"


def test_the_base_install_from_the_sdist_scans_and_reports_without_faust(
    dists: Dists, tmp_path: Path
) -> None:
    python = fresh_venv(tmp_path / "venv")
    looping = str(EXAMPLES / "sessions" / "looping.jsonl")
    # the sdist itself: pip builds its wheel, as a user's `pip install loopwatch` may
    run(python, "-m", "pip", "install", "-q", dists.sdist)
    app = tmp_path / "app"
    (app / "models").mkdir(parents=True)
    (app / "models" / "__init__.py").write_text('WHOSE = "the application"\n')
    out = run(
        python,
        "-c",
        # the application's own `models` first on sys.path, then ours from site-packages
        "import importlib.util as u, models as app_models, loopwatch.models;"
        "import loopwatch.streams.client, loopwatch.streams.cli;"
        "print(app_models.WHOSE);"
        "print(loopwatch.models.call_fingerprint('bash', {'cmd': 'cargo test'}));"
        "print([m for m in ('faust', 'mode', 'prometheus_client') if u.find_spec(m)]);"
        "import loopwatch, pathlib;"  # the in-process scan, from the installed package
        f"print(repr(loopwatch.scan(pathlib.Path({looping!r}))))",
        cwd=app,
    )
    assert out.splitlines()[:3] == [
        "the application",
        "sha256:40d39e472be6e5bd359976a905c732cbce4beeaade5d408b7c63fc27a79fb640",
        "[]",
    ]
    assert out.splitlines()[3].startswith("<ScanResult: 3 sessions, 32 events, 12 warnings")
    loopwatch = tmp_path / "venv" / "bin" / "loopwatch"
    assert run(loopwatch, "--version", cwd=app).strip() == "loopwatch 0.1.0"
    scanned = run(
        loopwatch, "scan", "--warnings-only", EXAMPLES / "sessions" / "looping.jsonl", cwd=app
    )
    assert "repeated_" in scanned, scanned
    report = tmp_path / "report.html"
    sessions = sorted((EXAMPLES / "sessions").glob("*.jsonl"))
    run(loopwatch, "report", *sessions, "--out", report, cwd=app)
    assert "<html" in report.read_text().lower()


def test_the_worker_extra_from_the_wheel_starts_a_worker(
    dists: Dists, tmp_path: Path, kafka_bootstrap: str
) -> None:
    python = fresh_venv(tmp_path / "venv")
    run(python, "-m", "pip", "install", "-q", f"{dists.wheel}[worker]")
    env = WorkerEnv.unique(kafka_bootstrap)
    port = free_ports()
    child_env = {k: v for k, v in env.env(port).items() if k != "PYTHONPATH"}
    run(tmp_path / "venv" / "bin" / "loopwatch", "topics", "create", cwd=tmp_path)
    worker = WorkerProcess(
        Settings.from_env(child_env),
        tmp_path / "worker.log",
        env=child_env,
        cwd=tmp_path,  # away from the checkout: the installed package runs
        interpreter=(str(python),),
    )
    worker.start()
    try:
        document = worker.wait_ready_blocking(timeout=120)
        assert document, document
    finally:
        code = worker.stop(signal.SIGTERM, timeout=60)
    assert code == 0, (tmp_path / "worker.log").read_text()[-3000:]


def frozen(python: Path) -> dict[str, str]:
    out = run(python, "-m", "pip", "list", "--format=json")
    return {p["name"].lower(): p["version"] for p in json.loads(out)}


def test_the_base_install_leaves_an_agent_frameworks_packages_alone(
    dists: Dists, tmp_path: Path
) -> None:
    python = fresh_venv(tmp_path / "venv")
    # the frameworks the adapters serve (the extras' own ranges), as an application has them
    run(
        python,
        "-m",
        "pip",
        "install",
        "-q",
        "langchain>=1,<2",
        "openai-agents>=0.24",
        "pydantic-ai-slim>=2.60,<3",
    )
    before = frozen(python)
    run(python, "-m", "pip", "install", "-q", dists.wheel)
    after = frozen(python)
    changed = {name: (v, after.get(name)) for name, v in before.items() if after.get(name) != v}
    assert changed == {}, changed
    assert "faust-streaming" not in after and "mode-streaming" not in after
    run(
        python,
        "-c",
        "import loopwatch.streams.client.langchain, loopwatch.streams.client.pydantic_ai",
    )

"""CPU time per event of the detector core on the shared real trajectories. Prints figures.

    .venv/bin/python ops/bench/core_cpu_bench.py [--profile seed|extended] [--reps 9]
        [--repo PATH]

The core over every event of ../shared/data/trajectories (all sessions interleaved as in
the files), timed with `time.process_time` and the fastest of `--reps` runs taken: on a
shared, loaded machine the CPU time of the best run moves far less than wall-clock
medians. `--repo` measures another checkout's core (e.g. today's main, from
`git archive main`) with this interpreter, for a before/after ratio; `--profile
extended` needs a checkout that has profiles. A checkout from before the `loopwatch`
package (top-level `models` and `streams`) is imported by those names; either way the
bench stops if the core it imported is not the one under `--repo` (this venv's editable
install would otherwise answer `loopwatch.*` with this checkout's core).
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[2]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="seed")
    parser.add_argument("--reps", type=int, default=9)
    parser.add_argument("--repo", type=Path, default=HERE)
    args = parser.parse_args(argv)
    models, detector = _core(args.repo.resolve())
    event_adapter, detection_config = models.EVENT_ADAPTER, models.DetectionConfig
    observe = detector.observe
    seed = args.profile == "seed"
    config = detection_config() if seed else detection_config(profile=args.profile)
    trajectories = HERE.parent / "shared" / "data" / "trajectories"
    files = sorted(trajectories.glob("*.jsonl"))
    if not files:
        print(f"skipped: {trajectories} not found")
        return 0
    events = [
        event_adapter.validate_json(line)
        for path in files
        for line in path.read_bytes().splitlines()
        if line.strip()
    ]
    best = float("inf")
    warnings = 0
    for _ in range(args.reps):
        _clear_caches()  # every run meets its call ids for the first time, as a worker does
        states: dict[str, object] = {}
        warnings = 0
        start = time.process_time()
        for event in events:
            state, verdict = observe(states.get(event.session_id), event, config)  # type: ignore[arg-type]
            if state is None:
                states.pop(event.session_id, None)
            else:
                states[event.session_id] = state
            warnings += verdict is not None and verdict.warning is not None
        best = min(best, time.process_time() - start)
    print(
        f"{args.repo.name:12} {args.profile:9} {len(events):,} events  "
        f"{best / len(events) * 1e6:6.2f} us/event CPU (best of {args.reps})  "
        f"{warnings} warnings"
    )
    return 0


def _clear_caches() -> None:
    """Empty the memoised functions (functools caches) of the core's modules."""
    for name, module in list(sys.modules.items()):
        if name.split(".")[0] in ("loopwatch", "models", "streams") and module is not None:
            for value in list(vars(module).values()):
                clear = getattr(value, "cache_clear", None)
                if callable(clear):
                    clear()


def _core(repo: Path) -> tuple[Any, Any]:
    """The models package and the detector of the checkout at `repo`."""
    prefix = "loopwatch." if (repo / "loopwatch").is_dir() else ""
    sys.path.insert(0, str(repo))
    models = importlib.import_module(prefix + "models")
    detector = importlib.import_module(prefix + "streams.detector")
    for module in (models, detector):
        where = Path(module.__file__ or "").resolve()
        if not where.is_relative_to(repo):
            raise SystemExit(f"{module.__name__} was imported from {where}, not from {repo}")
    return models, detector


if __name__ == "__main__":
    sys.exit(main())

"""The shipped monitoring files (ops/prometheus, ops/grafana) as tests read them, and
promtool (Debian's `prometheus` package; `.ci/run` installs it where missing)."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
PROMETHEUS_DIR = REPO / "ops" / "prometheus"
GRAFANA_DIR = REPO / "ops" / "grafana"
DASHBOARD = GRAFANA_DIR / "dashboards" / "loopwatch.json"
DATASOURCES = GRAFANA_DIR / "provisioning" / "datasources" / "prometheus.yml"
DASHBOARD_PROVIDERS = GRAFANA_DIR / "provisioning" / "dashboards" / "loopwatch.yml"

# Grafana's macros, replaced by durations so that promtool can parse the queries.
GRAFANA_MACROS = {
    "$__rate_interval": "1m",
    "$__interval": "1m",
    "$__range": "1h",
    # the dashboard's variables at "All" (allValue: any job, any or no namespace)
    "$job": ".*",
    "$namespace": ".*",
}
_METRIC = re.compile(r"\bloopwatch_[a-z_]+")
_SERIES_SUFFIXES = ("_bucket", "_count", "_sum")


def promtool() -> str:
    """The promtool binary; skips without it, except under CI=true, where it fails."""
    found = shutil.which("promtool")
    if found:
        return found
    reason = "promtool is not installed (apt-get install prometheus; .ci/run does it)"
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"CI=true but {reason}")
    pytest.skip(reason)


def load_yaml(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(path.read_text())
    return loaded


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def dashboard_queries() -> list[tuple[str, str]]:
    """(panel title, PromQL) of every query of every panel."""
    return [
        (panel["title"], target["expr"])
        for panel in dashboard()["panels"]
        for target in panel.get("targets", ())
    ]


def without_macros(expr: str) -> str:
    for macro, value in GRAFANA_MACROS.items():
        expr = expr.replace(macro, value)
    return expr


def loopwatch_series(expr: str) -> set[str]:
    """The loopwatch metric families a query reads (histogram series mapped to their
    family's `_bucket` etc. names as exposed)."""
    return set(_METRIC.findall(expr))


def exposed_series(exposition: str) -> set[str]:
    """Names of the samples in a Prometheus text exposition."""
    names = set()
    for line in exposition.splitlines():
        if line and not line.startswith("#"):
            names.add(re.split(r"[{ ]", line, maxsplit=1)[0])
    return names


def missing_from(exposition: str) -> dict[str, set[str]]:
    """Panel title → loopwatch series its queries read that the exposition lacks."""
    exposed = exposed_series(exposition)
    missing: dict[str, set[str]] = {}
    for title, expr in dashboard_queries():
        absent = {name for name in loopwatch_series(expr) if name not in exposed}
        if absent:
            missing.setdefault(title, set()).update(absent)
    return missing

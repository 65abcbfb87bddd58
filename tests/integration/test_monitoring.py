"""ops/prometheus and ops/grafana: the alert rules and the Prometheus config pass promtool,
the alerts fire on recorded series (`promtool test rules`), every dashboard query parses,
and the dashboard is wired to the provisioned datasource. (That every panel's metric is
on a real worker's /metrics: tests/integration/test_worker_verdicts.py.)"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from tests.support.monitoring import (
    DASHBOARD_PROVIDERS,
    DATASOURCES,
    PROMETHEUS_DIR,
    dashboard,
    dashboard_queries,
    load_yaml,
    loopwatch_series,
    promtool,
    without_macros,
)


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [promtool(), *args], capture_output=True, text=True, check=False, timeout=120
    )


def test_alert_rules_pass_promtool_check() -> None:
    done = _promtool("check", "rules", str(PROMETHEUS_DIR / "alerts.yml"))
    assert done.returncode == 0, done.stdout + done.stderr


def test_alerts_fire_on_recorded_series() -> None:
    done = _promtool("test", "rules", str(PROMETHEUS_DIR / "alerts.test.yml"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_every_alert_is_tested_firing() -> None:
    alerts = {
        rule["alert"]
        for group in load_yaml(PROMETHEUS_DIR / "alerts.yml")["groups"]
        for rule in group["rules"]
    }
    fired = {
        case["alertname"]
        for test in load_yaml(PROMETHEUS_DIR / "alerts.test.yml")["tests"]
        for case in test["alert_rule_test"]
        if case["exp_alerts"]
    }
    assert alerts == fired
    assert len(alerts) >= 5


def test_prometheus_config_is_valid_and_loads_the_rules() -> None:
    done = _promtool("check", "config", str(PROMETHEUS_DIR / "prometheus.yml"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 rule files found" in done.stdout


def test_every_dashboard_query_parses(tmp_path: Path) -> None:
    queries = dashboard_queries()
    assert len(queries) >= 15
    rules = tmp_path / "dashboard-queries.yml"
    lines = ["groups:", "  - name: dashboard", "    rules:"]
    for index, (_, expr) in enumerate(queries):
        lines += [f"      - record: dashboard:query_{index}", f"        expr: {expr!r}"]
    rules.write_text("\n".join(without_macros(line) for line in lines) + "\n")
    done = _promtool("check", "rules", str(rules))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(queries)} rules found" in done.stdout

    broken = tmp_path / "broken.yml"  # the check does reject a bad query
    broken.write_text(
        "groups:\n  - name: x\n    rules:\n      - record: x:y\n        expr: 'sum(rate(x[1m])'\n"
    )
    assert _promtool("check", "rules", str(broken)).returncode != 0


def test_every_panel_queries_a_loopwatch_metric_through_the_datasource_variable() -> None:
    # importable anywhere: the datasource is a variable (the provisioned one is the
    # default), offered for import through __inputs; job and namespace scope every query
    [source] = load_yaml(DATASOURCES)["datasources"]
    assert source["isDefault"] is True
    board = dashboard()
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    assert {"job", "namespace"} <= set(variables)
    assert [i["pluginId"] for i in board["__inputs"]] == ["prometheus"]
    assert "loopwatch-prometheus" not in json.dumps(board)
    for panel in board["panels"]:
        if panel["type"] == "row":
            continue
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == "${datasource}", panel["title"]
            for series in re.finditer(r"\bloopwatch_[a-z_]+(\{[^}]*\})?", target["expr"]):
                assert 'job=~"$job"' in (series.group(1) or ""), target["expr"]
                assert 'namespace=~"$namespace"' in series.group(1), target["expr"]
        read = set().union(*(loopwatch_series(target["expr"]) for target in panel["targets"]))
        assert read, panel["title"]
    [provider] = load_yaml(DASHBOARD_PROVIDERS)["providers"]
    assert provider["type"] == "file"

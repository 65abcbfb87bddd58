"""The Helm chart (ops/helm/loopwatch): `helm lint` passes and `helm template` renders,
for the default values and for SASL_SSL, monitoring-on and three-replica value sets,
objects that are valid against the Kubernetes schemas, checked offline
(kubernetes-validate ships them; nothing is fetched). The Prometheus Operator's kinds have
no schema there: their rules go through promtool, their shape is checked here.
Under CI=true a missing helm fails the tests; elsewhere they are skipped.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.support.monitoring import promtool

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "ops" / "helm" / "loopwatch"
KUBERNETES = "1.30.0"  # rendered for and validated against this Kubernetes release
# helm built with `go install` assumes Kubernetes 1.20 (its Makefile sets the default)
KUBE = ["--kube-version", KUBERNETES]

VALUE_SETS: dict[str, list[str]] = {
    "default": [],
    "sasl-ssl": [
        "--set", "kafka.bootstrapServers=broker-0.kafka:9093",
        "--set", "kafka.securityProtocol=SASL_SSL",
        "--set", "kafka.sasl.username=loopwatch",
        "--set", "kafka.sasl.existingSecret=kafka-credentials",
        "--set", "kafka.tls.existingSecret=kafka-ca",
        "--set", "kafka.tls.certFile=tls.crt",
        "--set", "kafka.tls.keyFile=tls.key",
        "--set", "otelBridge.enabled=true",
    ],
    "monitoring": [
        "--set", "monitoring.serviceMonitor.enabled=true",
        "--set", "monitoring.prometheusRule.enabled=true",
        "--set", "monitoring.prometheusRule.labels.release=kube-prometheus-stack",
        "--set", "monitoring.grafanaDashboard.enabled=true",
    ],
    "three-replicas": [
        "--set", "worker.replicas=3",
        "--set", "config.LOOPWATCH_PARTITIONS=24",
        "--set", "worker.persistence.storageClassName=fast-ssd",
    ],
}  # fmt: skip


def helm() -> str:
    found = shutil.which("helm")
    if found is None:
        reason = "no helm on PATH (.ci/run installs it)"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(reason)
        pytest.skip(reason)
    return found


def render(values: list[str]) -> list[dict[str, Any]]:
    done = subprocess.run(
        [helm(), "template", "lw", str(CHART), "--namespace", "agents", *KUBE, *values],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def by_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def env_of(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


@pytest.mark.parametrize("name", VALUE_SETS)
def test_helm_lint_passes(name: str) -> None:
    done = subprocess.run(
        [helm(), "lint", "--strict", *KUBE, str(CHART), *VALUE_SETS[name]],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("name", VALUE_SETS)
def test_every_rendered_object_is_valid_against_the_kubernetes_schemas(name: str) -> None:
    objects = render(VALUE_SETS[name])
    checked = 0
    for obj in objects:
        if obj["apiVersion"].startswith("monitoring.coreos.com/"):
            continue  # CRDs: below
        kubernetes_validate.validate(obj, KUBERNETES, strict=True)
        checked += 1
    assert checked >= 6, [o["kind"] for o in objects]


def test_the_worker_is_a_statefulset_with_its_pod_name_as_worker_id() -> None:
    objects = render([])
    [sts] = by_kind(objects, "StatefulSet")
    [worker] = sts["spec"]["template"]["spec"]["containers"]
    env = env_of(worker)
    assert env["LOOPWATCH_WORKER_ID"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert env["LOOPWATCH_STORE"] == "rocksdb://"
    assert worker["readinessProbe"]["httpGet"]["path"] == "/ready"
    assert worker["livenessProbe"]["httpGet"]["path"] == "/healthz"
    [claim] = sts["spec"]["volumeClaimTemplates"]
    mounts = {m["name"]: m["mountPath"] for m in worker["volumeMounts"]}
    assert mounts[claim["metadata"]["name"]] == env["LOOPWATCH_DATA_DIR"]
    pod = sts["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    [pdb] = by_kind(objects, "PodDisruptionBudget")
    assert pdb["spec"]["selector"] == sts["spec"]["selector"]
    [job] = by_kind(objects, "Job")
    assert job["spec"]["template"]["spec"]["containers"][0]["args"] == ["topics", "create"]
    assert {d["metadata"]["name"] for d in by_kind(objects, "Deployment")} == {
        "lw-loopwatch-dashboard"
    }


def test_sasl_ssl_takes_the_password_from_a_secret_and_mounts_the_ca() -> None:
    objects = render(VALUE_SETS["sasl-ssl"])
    assert by_kind(objects, "Secret") == []  # an existing Secret: the chart makes none
    workloads = by_kind(objects, "StatefulSet") + by_kind(objects, "Deployment")
    assert len(workloads) == 3  # worker, dashboard, OTel bridge
    for workload in workloads + by_kind(objects, "Job"):
        [container] = workload["spec"]["template"]["spec"]["containers"]
        env = env_of(container)
        assert env["KAFKA_SECURITY_PROTOCOL"] == "SASL_SSL"
        assert env["KAFKA_SASL_PASSWORD"] == {
            "secretKeyRef": {"name": "kafka-credentials", "key": "sasl-password"}
        }
        assert env["KAFKA_SSL_CAFILE"] == "/etc/loopwatch/kafka-tls/ca.crt"
        assert "/etc/loopwatch/kafka-tls" in {m["mountPath"] for m in container["volumeMounts"]}
    # with a password in the values, the chart's own Secret holds it
    own = render(
        [
            *("--set", "kafka.securityProtocol=SASL_SSL"),
            *("--set", "kafka.sasl.username=loopwatch"),
            *("--set", "kafka.sasl.password=s3cret"),
        ]
    )
    [secret] = by_kind(own, "Secret")
    assert "sasl-password" in secret["data"]
    [sts] = by_kind(own, "StatefulSet")
    [worker] = sts["spec"]["template"]["spec"]["containers"]
    assert (
        env_of(worker)["KAFKA_SASL_PASSWORD"]["secretKeyRef"]["name"] == secret["metadata"]["name"]
    )


def test_monitoring_builds_the_rules_from_ops_prometheus_alerts(tmp_path: Path) -> None:
    assert (CHART / "files" / "alerts.yml").read_bytes() == (
        ROOT / "ops" / "prometheus" / "alerts.yml"
    ).read_bytes(), "copy ops/prometheus/alerts.yml to the chart's files/"
    objects = render(VALUE_SETS["monitoring"])
    [rule] = by_kind(objects, "PrometheusRule")
    alerts = yaml.safe_load((ROOT / "ops" / "prometheus" / "alerts.yml").read_text())
    assert rule["spec"]["groups"] == alerts["groups"]
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    rules = tmp_path / "rules.yml"
    rules.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    checked = subprocess.run(
        [promtool(), "check", "rules", str(rules)], capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    [board] = by_kind(objects, "ConfigMap")
    assert board["metadata"]["labels"]["grafana_dashboard"] == "1"
    dashboard = (ROOT / "ops" / "grafana" / "dashboards" / "loopwatch.json").read_text()
    assert (CHART / "files" / "loopwatch-dashboard.json").read_text() == dashboard
    assert json.loads(board["data"]["loopwatch.json"]) == json.loads(dashboard)
    [monitor] = by_kind(objects, "ServiceMonitor")
    [service] = [
        s for s in by_kind(objects, "Service") if s["metadata"]["name"].endswith("-worker")
    ]
    assert monitor["spec"]["selector"]["matchLabels"] == service["spec"]["selector"]
    assert monitor["spec"]["endpoints"][0]["port"] == service["spec"]["ports"][0]["name"]


def test_three_replicas_keep_one_claim_and_one_identity_each() -> None:
    objects = render(VALUE_SETS["three-replicas"])
    [sts] = by_kind(objects, "StatefulSet")
    assert sts["spec"]["replicas"] == 3
    [claim] = sts["spec"]["volumeClaimTemplates"]
    assert claim["spec"]["storageClassName"] == "fast-ssd"
    [worker] = sts["spec"]["template"]["spec"]["containers"]
    assert env_of(worker)["LOOPWATCH_PARTITIONS"] == "24"


def test_the_offline_validator_rejects_a_broken_object() -> None:
    [sts] = by_kind(render([]), "StatefulSet")
    sts["spec"]["replicas"] = "three"
    sts["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]["httpGets"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(sts, KUBERNETES, strict=True)

"""Settings from the environment: defaults, parsing, and messages that name the bad value."""

from __future__ import annotations

import re
import ssl
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopwatch.models import DetectionConfig
from loopwatch.streams.settings import ENVIRONMENT, Settings, SettingsError

REPO = Path(__file__).resolve().parents[3]
SASL = {
    "KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
    "KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
    "KAFKA_SASL_USERNAME": "loopwatch",
    "KAFKA_SASL_PASSWORD": "s3cret-pa55",
}


def test_defaults_when_nothing_is_set() -> None:
    settings = Settings.from_env({})
    assert settings.bootstrap_servers == "localhost:9092"
    assert settings.app_id == "loopwatch"
    assert (
        settings.events_topic,
        settings.verdicts_topic,
        settings.warnings_topic,
        settings.dlq_topic,
    ) == ("agent-events", "loop-verdicts", "loop-warnings", "agent-events-dlq")
    assert settings.partitions == 12
    assert settings.verdict_partitions == 3  # read whole by every runtime: few
    assert settings.detection == DetectionConfig(threshold=3, mutating_failure_threshold=2)
    assert settings.session_ttl_seconds == 86400
    assert settings.max_event_bytes == 1024 * 1024
    assert settings.store_url == "memory://"
    assert settings.web_port == 6066
    assert settings.output_linger_ms == 10
    assert settings.fetch_wait_ms == 0
    assert settings.commit_interval_ms == 500
    assert settings.changelog_topic == "loopwatch-sessions-changelog"
    # verdicts are read within seconds; dead letters wait for a person
    assert settings.verdicts_retention_seconds < settings.events_retention_seconds
    assert settings.events_retention_seconds < settings.dlq_retention_seconds


def test_every_variable_is_read() -> None:
    settings = Settings.from_env(
        {
            "KAFKA_BOOTSTRAP_SERVERS": "k1:9092, k2:19092",
            "LOOPWATCH_APP_ID": "lw-prod",
            "LOOPWATCH_EVENTS_TOPIC": "ev",
            "LOOPWATCH_VERDICTS_TOPIC": "vd",
            "LOOPWATCH_WARNINGS_TOPIC": "wn",
            "LOOPWATCH_DLQ_TOPIC": "dl",
            "LOOPWATCH_PARTITIONS": "24",
            "LOOPWATCH_VERDICT_PARTITIONS": "6",
            "LOOPWATCH_REPLICATION_FACTOR": "3",
            "LOOPWATCH_THRESHOLD": "5",
            "LOOPWATCH_MUTATING_FAILURE_THRESHOLD": "4",
            "LOOPWATCH_VERDICTS_RETENTION_SECONDS": "3600",
            "LOOPWATCH_DLQ_RETENTION_SECONDS": "-1",
            "LOOPWATCH_SESSION_TTL_SECONDS": "60",
            "LOOPWATCH_MAX_EVENT_BYTES": "2048",
            "LOOPWATCH_STORE": "rocksdb://",
            "LOOPWATCH_WEB_PORT": "8080",
            "LOOPWATCH_PROCESSING_GUARANTEE": "exactly_once",
            "LOOPWATCH_OUTPUT_LINGER_MS": "0",
            "LOOPWATCH_FETCH_WAIT_MS": "3",
            "LOOPWATCH_WORKER_ID": "worker-3",
            "LOOPWATCH_SESSION_TIMEOUT_MS": "6000",
            "LOOPWATCH_HEARTBEAT_INTERVAL_MS": "2000",
            "LOOPWATCH_REBALANCE_TIMEOUT_MS": "30000",
            "LOOPWATCH_STANDBY_REPLICAS": "1",
            "LOOPWATCH_ROCKSDB_CACHE_MB": "512",
            "LOOPWATCH_SESSION_CACHE": "200000",
        }
    )
    assert settings.bootstrap_servers == "k1:9092,k2:19092"
    assert settings.changelog_topic == "lw-prod-sessions-changelog"
    assert (settings.partitions, settings.replication_factor) == (24, 3)
    assert settings.verdict_partitions == 6
    assert settings.detection == DetectionConfig(threshold=5, mutating_failure_threshold=4)
    assert settings.verdicts_retention_seconds == 3600
    assert settings.dlq_retention_seconds == -1
    assert (settings.session_ttl_seconds, settings.max_event_bytes) == (60, 2048)
    assert (settings.store_url, settings.web_port) == ("rocksdb://", 8080)
    assert settings.processing_guarantee == "exactly_once"
    assert settings.output_linger_ms == 0
    assert settings.fetch_wait_ms == 3
    assert settings.worker_id == "worker-3"
    assert (settings.session_timeout_ms, settings.heartbeat_interval_ms) == (6000, 2000)
    assert settings.rebalance_timeout_ms == 30000
    assert (settings.standby_replicas, settings.rocksdb_cache_mb) == (1, 512)
    assert settings.session_cache == 200_000


def test_empty_value_means_default() -> None:
    assert Settings.from_env({"LOOPWATCH_PARTITIONS": "  "}).partitions == 12


@pytest.mark.parametrize(
    ("name", "raw", "expected"),
    [
        ("LOOPWATCH_PARTITIONS", "abc", "LOOPWATCH_PARTITIONS must be an integer >= 1, got 'abc'"),
        ("LOOPWATCH_PARTITIONS", "0", "LOOPWATCH_PARTITIONS must be an integer >= 1, got '0'"),
        (
            "LOOPWATCH_VERDICT_PARTITIONS",
            "0",
            "LOOPWATCH_VERDICT_PARTITIONS must be an integer >= 1, got '0'",
        ),
        ("LOOPWATCH_THRESHOLD", "true", "LOOPWATCH_THRESHOLD must be an integer >= 1, got 'true'"),
        ("LOOPWATCH_THRESHOLD", "2.0", "LOOPWATCH_THRESHOLD must be an integer >= 1, got '2.0'"),
        ("LOOPWATCH_THRESHOLD", "-3", "LOOPWATCH_THRESHOLD must be an integer >= 1, got '-3'"),
        (
            "LOOPWATCH_MUTATING_FAILURE_THRESHOLD",
            "1e3",
            "LOOPWATCH_MUTATING_FAILURE_THRESHOLD must be an integer >= 1, got '1e3'",
        ),
        (
            "LOOPWATCH_EVENTS_RETENTION_SECONDS",
            "0",
            "LOOPWATCH_EVENTS_RETENTION_SECONDS must be an integer >= 1 or -1, got '0'",
        ),
        ("LOOPWATCH_WEB_PORT", "70000", "LOOPWATCH_WEB_PORT must be a port number"),
        ("LOOPWATCH_OUTPUT_LINGER_MS", "1001", "LOOPWATCH_OUTPUT_LINGER_MS must be milliseconds"),
        ("LOOPWATCH_OUTPUT_LINGER_MS", "2.5", "from 0 to 1000, got '2.5'"),
        (
            "LOOPWATCH_FETCH_WAIT_MS",
            "101",
            "LOOPWATCH_FETCH_WAIT_MS must be milliseconds from 0 to 100, got '101'",
        ),
        ("LOOPWATCH_FETCH_WAIT_MS", "-1", "LOOPWATCH_FETCH_WAIT_MS must be milliseconds"),
        (
            "LOOPWATCH_COMMIT_INTERVAL_MS",
            "50",
            "LOOPWATCH_COMMIT_INTERVAL_MS must be milliseconds from 100 to 60000, got '50'",
        ),
        ("LOOPWATCH_EVENTS_TOPIC", "agent events", "LOOPWATCH_EVENTS_TOPIC must be 1-200"),
        ("LOOPWATCH_WORKER_ID", "pod/0", "LOOPWATCH_WORKER_ID must be 1-200 characters"),
        (
            "LOOPWATCH_SESSION_TIMEOUT_MS",
            "100000",
            "LOOPWATCH_SESSION_TIMEOUT_MS must be milliseconds from 1000 to 90000, got '100000'",
        ),
        ("LOOPWATCH_SESSION_TIMEOUT_MS", "2s", "got '2s'"),
        ("LOOPWATCH_HEARTBEAT_INTERVAL_MS", "50", "LOOPWATCH_HEARTBEAT_INTERVAL_MS must be"),
        ("LOOPWATCH_REBALANCE_TIMEOUT_MS", "0", "LOOPWATCH_REBALANCE_TIMEOUT_MS must be"),
        (
            "LOOPWATCH_HEARTBEAT_INTERVAL_MS",
            "4000",
            "LOOPWATCH_HEARTBEAT_INTERVAL_MS (4000) must be at most a third of "
            "LOOPWATCH_SESSION_TIMEOUT_MS (10000)",
        ),
        ("LOOPWATCH_APP_ID", "..", "LOOPWATCH_APP_ID must be 1-200 characters"),
        (
            "LOOPWATCH_STANDBY_REPLICAS",
            "4",
            "LOOPWATCH_STANDBY_REPLICAS must be an integer from 0 to 3, got '4'",
        ),
        ("LOOPWATCH_ROCKSDB_CACHE_MB", "4", "LOOPWATCH_ROCKSDB_CACHE_MB must be an integer >= 8"),
        (
            "LOOPWATCH_SESSION_CACHE",
            "-1",
            "LOOPWATCH_SESSION_CACHE must be an integer from 0 to 10000000, got '-1'",
        ),
        ("KAFKA_BOOTSTRAP_SERVERS", "localhost", "KAFKA_BOOTSTRAP_SERVERS must be a comma"),
        ("KAFKA_BOOTSTRAP_SERVERS", "a:1,b:x", "got 'a:1,b:x'"),
        ("LOOPWATCH_STORE", "redis://", "LOOPWATCH_STORE must start with memory:// or rocksdb://"),
        ("KAFKA_SECURITY_PROTOCOL", "TLS", "KAFKA_SECURITY_PROTOCOL must be one of PLAINTEXT"),
        ("KAFKA_SSL_CAFILE", "/nonexistent/ca.pem", "KAFKA_SSL_CAFILE must name a readable file"),
    ],
)
def test_bad_value_is_rejected_with_name_and_value(name: str, raw: str, expected: str) -> None:
    with pytest.raises(SettingsError) as raised:
        Settings.from_env({name: raw})
    assert expected in str(raised.value)


@given(st.text(max_size=12))
def test_partitions_accept_exactly_the_positive_integers(raw: str) -> None:
    text = raw.strip()
    try:
        settings = Settings.from_env({"LOOPWATCH_PARTITIONS": raw})
    except SettingsError as exc:
        assert str(exc).startswith("LOOPWATCH_PARTITIONS must be an integer >= 1, got ")
        assert not (re.fullmatch(r"[+-]?[0-9]+", text) and int(text) >= 1)
    else:
        expected = int(text) if text else 12
        assert settings.partitions == expected


def test_sasl_needs_mechanism_user_and_password() -> None:
    for missing in ("KAFKA_SASL_MECHANISM", "KAFKA_SASL_USERNAME", "KAFKA_SASL_PASSWORD"):
        env = {k: v for k, v in SASL.items() if k != missing}
        with pytest.raises(SettingsError, match=f"{missing} must be set"):
            Settings.from_env(env)


def test_password_never_shows() -> None:
    settings = Settings.from_env(SASL)
    for text in (repr(settings), str(settings), settings.model_dump_json()):
        assert "s3cret-pa55" not in text
    with pytest.raises(SettingsError) as raised:
        Settings.from_env({**SASL, "KAFKA_SASL_MECHANISM": "MD5"})
    assert "s3cret-pa55" not in str(raised.value)


def test_password_keeps_its_spaces() -> None:
    settings = Settings.from_env({**SASL, "KAFKA_SASL_PASSWORD": " pass word "})
    assert settings.aiokafka_kwargs()["sasl_plain_password"] == " pass word "


def test_plaintext_client_kwargs() -> None:
    kwargs = Settings.from_env({"KAFKA_BOOTSTRAP_SERVERS": "k:9092"}).aiokafka_kwargs()
    assert kwargs == {"bootstrap_servers": "k:9092", "security_protocol": "PLAINTEXT"}
    assert Settings.from_env({}).faust_security() == {}


def test_sasl_ssl_client_kwargs_carry_tls_and_credentials() -> None:
    settings = Settings.from_env({**SASL, "KAFKA_SECURITY_PROTOCOL": "sasl_ssl"})
    kwargs = settings.aiokafka_kwargs()
    assert kwargs["security_protocol"] == "SASL_SSL"
    assert kwargs["sasl_mechanism"] == "SCRAM-SHA-512"
    assert kwargs["sasl_plain_username"] == "loopwatch"
    assert kwargs["sasl_plain_password"] == "s3cret-pa55"
    assert isinstance(kwargs["ssl_context"], ssl.SSLContext)
    assert kwargs["ssl_context"].verify_mode == ssl.CERT_REQUIRED
    credentials = settings.faust_security()["broker_credentials"]
    assert credentials.mechanism.value == "SCRAM-SHA-512"
    assert credentials.protocol.value == "SASL_SSL"


def test_ssl_with_a_ca_file() -> None:
    bundle = ssl.get_default_verify_paths().cafile
    if bundle is None:
        pytest.skip("this machine has no default CA bundle file to load")
    settings = Settings.from_env({"KAFKA_SECURITY_PROTOCOL": "SSL", "KAFKA_SSL_CAFILE": bundle})
    context = settings.aiokafka_kwargs()["ssl_context"]
    assert context.cert_store_stats()["x509_ca"] > 0
    assert settings.faust_security()["broker_credentials"].protocol.value == "SSL"


def test_readme_documents_every_variable() -> None:
    # The README's table, or an area's own page under docs/ (the README stays short).
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    readme = "\n".join(page.read_text() for page in pages)
    missing = [name for name, _ in ENVIRONMENT.values() if f"`{name}`" not in readme]
    assert missing == []

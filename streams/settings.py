"""The one settings object of the worker and the CLI, read from the environment.

`Settings.from_env()` validates every value at start-up; a bad one raises `SettingsError`
whose message names the environment variable and the bad value (never a secret's value).
The README's configuration table lists the same variables as `ENVIRONMENT` below.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, StrictInt, ValidationError

from loopwatch.models import ALL_RULES, DetectionConfig, Profile
from loopwatch.models.config import THRESHOLD_KEYS
from loopwatch.streams.env_values import (
    Parser,
    SettingsError,
    boolean,
    choice,
    existing_file,
    integer,
    milliseconds,
    port,
    secret,
    servers,
    store,
    switch,
    text,
    topic_name,
)

__all__ = ["ENVIRONMENT", "Settings", "SettingsError"]

SecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
SaslMechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
ProcessingGuarantee = Literal["at_least_once", "exactly_once"]
LogFormat = Literal["text", "json"]

DAY_SECONDS = 24 * 3600
MIB = 1024 * 1024
MAX_LINGER_MS = 1000
# A fetch wait is a latency added while events keep coming: beyond ~100 ms it is a
# linger nobody wants (faust's idle long poll is 1.5 s).
MAX_FETCH_WAIT_MS = 100
# Kafka's own bounds are the broker's group.min/max.session.timeout.ms (6 s / 30 min by
# default); faust requires the session timeout to stay below its 90 s request timeout.
MAX_STANDBY_REPLICAS = 3
DEFAULT_SESSION_CACHE = 4096
MAX_SESSION_CACHE = 10_000_000
MIN_SESSION_TIMEOUT_MS = 1_000
MAX_SESSION_TIMEOUT_MS = 90_000


class Settings(BaseModel):
    """Everything the worker and the CLI take from their environment."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    bootstrap_servers: str = "localhost:9092"
    """Comma-separated host:port list of the Kafka brokers."""
    app_id: str = "loopwatch"
    """faust app id: the consumer group and the prefix of the table's changelog topic."""
    events_topic: str = "agent-events"
    verdicts_topic: str = "loop-verdicts"
    warnings_topic: str = "loop-warnings"
    dlq_topic: str = "agent-events-dlq"
    episodes_topic: str = "loop-episodes"
    """One record per closed loop episode (docs/contract.md §8)."""
    partitions: StrictInt = Field(12, ge=1)
    """Partitions of the events topic and of the table's changelog (they must match), and
    of the warnings, dead-letter and episodes topics."""
    verdict_partitions: StrictInt = Field(3, ge=1)
    """Partitions of the verdicts topic. Every runtime's client reads all of them (it holds
    every partition, so sessions come and go without a fetch abandoned), so they buy its
    readers nothing, and more of them split every worker's verdict batches and every
    reader's fetches into more pieces: 3 instead of 12 lowered the paced wait's p99 (median
    of 13 alternated runs 21.6 -> 12.7 ms, docs/performance.md, "Verdict partitions").
    Verdicts stay in order per session at any count."""
    replication_factor: StrictInt = Field(1, ge=1)
    events_retention_seconds: StrictInt = Field(7 * DAY_SECONDS, ge=-1)
    """-1 keeps records for ever (Kafka's retention.ms=-1)."""
    verdicts_retention_seconds: StrictInt = Field(DAY_SECONDS, ge=-1)
    """Short: a runtime reads the verdict of its newest event within seconds."""
    warnings_retention_seconds: StrictInt = Field(14 * DAY_SECONDS, ge=-1)
    dlq_retention_seconds: StrictInt = Field(14 * DAY_SECONDS, ge=-1)
    """Long enough for someone to look at dead letters after a weekend."""
    config_topic: str = "loopwatch-config"
    """Compacted topic of per-agent policy records (docs/contract.md §9.6)."""
    profile: Profile = "seed"
    """Detection profile of the built-in policy: `seed` (docs/contract.md §4) or `extended`."""
    episodes_retention_seconds: StrictInt = Field(30 * DAY_SECONDS, ge=-1)
    """Episodes are the unit of loop statistics over weeks; they are small and few."""
    threshold: StrictInt | None = Field(None, ge=1)
    mutating_failure_threshold: StrictInt | None = Field(None, ge=1)
    """The thresholds: None, the profile's default (docs/contract.md §9.5)."""
    call_in_turn_threshold: StrictInt | None = Field(None, ge=1)
    cycle_threshold: StrictInt | None = Field(None, ge=1)
    error_threshold: StrictInt | None = Field(None, ge=1)
    call_floor_threshold: StrictInt | None = Field(None, ge=1)
    message_threshold: StrictInt | None = Field(None, ge=1)
    condensation_threshold: StrictInt | None = Field(None, ge=1)
    result_aware_batches: bool | None = None
    """None: the profile's choice."""
    rule_repeated_failed_mutation: bool | None = None
    """`LOOPWATCH_RULE_<RULE>`: switch one rule on or off against the profile (None: as
    the profile says)."""
    rule_repeated_result: bool | None = None
    rule_repeated_read_range: bool | None = None
    rule_repeated_batch: bool | None = None
    rule_repeated_call_in_turn: bool | None = None
    rule_repeated_cycle: bool | None = None
    rule_repeated_error: bool | None = None
    rule_recurring_result: bool | None = None
    rule_repeated_call: bool | None = None
    rule_repeated_message: bool | None = None
    rule_repeated_condensation: bool | None = None
    session_ttl_seconds: StrictInt = Field(DAY_SECONDS, ge=1)
    """An idle session's state is dropped after this long."""
    ended_retention_seconds: StrictInt = Field(0, ge=0)
    """How long an ended session's state is kept (0: dropped at `session_end`)."""
    max_event_bytes: StrictInt = Field(MIB, ge=1)
    """A larger event record goes to the dead-letter topic."""
    store_url: str = "memory://"
    """faust table store: `memory://` for development, `rocksdb://` for production."""
    data_dir: str = "loopwatch-data"
    standby_replicas: StrictInt = Field(0, ge=0, le=MAX_STANDBY_REPLICAS)
    """Other workers that keep a copy of each partition's table up to date, so that one
    of them takes the partition over without rebuilding it (docs/operations.md)."""
    rocksdb_cache_mb: StrictInt = Field(128, ge=8, le=1024 * 1024)
    """The RocksDB block cache of one worker, in MiB, shared out over the partitions."""
    session_cache: StrictInt = Field(DEFAULT_SESSION_CACHE, ge=0, le=MAX_SESSION_CACHE)
    """Sessions whose decoded record the worker keeps in memory (least recently used
    first out): their next event skips the record's decode (docs/operations.md)."""
    processing_guarantee: ProcessingGuarantee = "at_least_once"
    output_linger_ms: StrictInt = Field(10, ge=0, le=MAX_LINGER_MS)
    """How long a verdict or changelog record may wait to share a batch (streams.kafka.outputs):
    more throughput for that much latency."""
    fetch_wait_ms: StrictInt = Field(0, ge=0, le=MAX_FETCH_WAIT_MS)
    """While events keep coming, how long the broker may hold a fetch for a few more
    (streams.kafka.faust_ext.fetch_wait): less CPU per event (worker and broker) for a few ms
    more wait per model call; 0 (the default): every fetch returns with the first record."""
    batch_hand_off: bool = True
    """Hand the events topic's records to the worker a fetched batch per partition at a
    time (streams.kafka.faust_ext.batch_hand_off) instead of one record at a time through
    faust's fetch loop: the same processing per record, faust's per-record bookkeeping
    once per batch (docs/performance.md, "Batches per partition"). False: faust's
    per-record loop."""
    changelog_batches: bool = True
    """Hand the session table's changelog records to its recovery a fetched batch per
    partition at a time, straight from the consumer (streams.kafka.faust_ext.changelog_hand_off)
    instead of one faust event at a time through the changelog queue: the same restored
    table, ~2x the records per second (docs/performance.md §4). False: faust's path."""
    commit_interval_ms: StrictInt = Field(500, ge=100, le=60_000)
    """How often processed offsets are committed (faust's default is 2.8 s). Each commit
    writes the sessions changed since the last one and waits for every record to be
    acknowledged, so a longer interval makes a bigger burst (a longer tail in the wait
    for verdicts) and more events to process again after a crash; a shorter one writes
    a session that changes between commits more often (docs/performance.md)."""
    worker_id: str | None = None
    """Stable name of this worker (Kafka's `group.instance.id`, static membership): a
    restarted worker takes its partitions back at once, without a rebalance. Unique per
    worker; unset: dynamic membership."""
    session_timeout_ms: StrictInt = Field(
        10_000, ge=MIN_SESSION_TIMEOUT_MS, le=MAX_SESSION_TIMEOUT_MS
    )
    """A worker that sent no heartbeat for this long is dead: its partitions move."""
    heartbeat_interval_ms: StrictInt = Field(1_000, ge=100)
    """How often a worker tells the group coordinator it is alive (<= 1/3 of the session)."""
    rebalance_timeout_ms: StrictInt = Field(
        20_000, ge=MIN_SESSION_TIMEOUT_MS, le=MAX_SESSION_TIMEOUT_MS
    )
    """How long a rebalance waits for the live workers to rejoin."""
    log_format: LogFormat = "text"
    """`json`: one JSON object per log line (streams.worker.log_format)."""
    web_host: str = "127.0.0.1"
    web_port: StrictInt = Field(6066, ge=1, le=65535)
    dashboard_token: SecretStr | None = None
    """`loopwatch dashboard` (and the demo's page) require this bearer token when set
    (streams.fleetview.guard); never logged or printed."""
    security_protocol: SecurityProtocol = "PLAINTEXT"
    sasl_mechanism: SaslMechanism | None = None
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Settings from `environ` (default: the process environment); unset means default."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for field, (name, parse) in ENVIRONMENT.items():
            raw = env.get(name, "")
            if raw.strip():  # set but empty counts as unset, as in most shells' configs
                # a password keeps its spaces; any other value loses stray ones
                values[field] = parse(name, raw if parse is secret else raw.strip())
        try:
            settings = cls(**values)
        except ValidationError as exc:  # only reachable through a parser gap; name it anyway
            error = exc.errors()[0]
            field = str(error["loc"][0])
            raise SettingsError(f"{ENVIRONMENT[field][0]}: {error['msg']}") from None
        settings._check_security()
        settings._check_timeouts()
        return settings

    @property
    def detection(self) -> DetectionConfig:
        """The built-in policy (docs/contract.md §9.5): what judges an agent that no
        policy record covers."""
        switched = {rule: getattr(self, f"rule_{rule}") for rule in ALL_RULES}
        thresholds = {
            key: value for key in THRESHOLD_KEYS if (value := getattr(self, key)) is not None
        }
        return DetectionConfig(
            profile=self.profile,
            **thresholds,
            result_aware_batches=self.result_aware_batches,
            rules={rule: on for rule, on in switched.items() if on is not None},
        )

    @property
    def changelog_topic(self) -> str:
        """The `sessions` table's changelog, as faust names it."""
        return f"{self.app_id}-sessions-changelog"

    def ssl_context(self) -> ssl.SSLContext | None:
        """A TLS context for SSL / SASL_SSL (system CAs unless KAFKA_SSL_CAFILE is set)."""
        if not self.security_protocol.endswith("SSL"):
            return None
        context = ssl.create_default_context(cafile=self.ssl_cafile)
        if self.ssl_certfile:
            context.load_cert_chain(self.ssl_certfile, self.ssl_keyfile)
        return context

    def aiokafka_kwargs(self) -> dict[str, Any]:
        """Connection keyword arguments for any aiokafka client (producer, consumer, admin)."""
        kwargs: dict[str, Any] = {
            "bootstrap_servers": self.bootstrap_servers,
            "security_protocol": self.security_protocol,
        }
        context = self.ssl_context()
        if context is not None:
            kwargs["ssl_context"] = context
        if self.security_protocol.startswith("SASL"):
            assert self.sasl_password is not None  # _check_security guarantees it
            kwargs["sasl_mechanism"] = self.sasl_mechanism
            kwargs["sasl_plain_username"] = self.sasl_username
            kwargs["sasl_plain_password"] = self.sasl_password.get_secret_value()
        return kwargs

    def faust_security(self) -> dict[str, Any]:
        """`faust.App` keyword arguments for the configured security protocol."""
        if self.security_protocol == "PLAINTEXT":
            return {}
        import faust  # noqa: PLC0415  (lazy: the CLI's settings checks need no faust)

        context = self.ssl_context()
        if self.security_protocol == "SSL":
            return {"broker_credentials": faust.SSLCredentials(context)}
        assert self.sasl_password is not None  # _check_security guarantees it
        return {
            "broker_credentials": faust.SASLCredentials(
                username=self.sasl_username,
                password=self.sasl_password.get_secret_value(),
                ssl_context=context,
                mechanism=self.sasl_mechanism,
            )
        }

    def _check_timeouts(self) -> None:
        if self.heartbeat_interval_ms * 3 > self.session_timeout_ms:
            raise SettingsError(
                f"LOOPWATCH_HEARTBEAT_INTERVAL_MS ({self.heartbeat_interval_ms}) must be at "
                f"most a third of LOOPWATCH_SESSION_TIMEOUT_MS ({self.session_timeout_ms})"
            )

    def _check_security(self) -> None:
        if self.security_protocol.startswith("SASL"):
            for field in ("sasl_mechanism", "sasl_username", "sasl_password"):
                if getattr(self, field) is None:
                    raise SettingsError(
                        f"{ENVIRONMENT[field][0]} must be set when KAFKA_SECURITY_PROTOCOL "
                        f"is {self.security_protocol}"
                    )
        if self.ssl_keyfile and not self.ssl_certfile:
            raise SettingsError("KAFKA_SSL_KEYFILE is set but KAFKA_SSL_CERTFILE is not")


MIN_TOKEN_CHARS = 16


def _token(name: str, raw: str) -> SecretStr:
    """A bearer token: long enough not to be guessed (its value is never shown)."""
    if len(raw.strip()) < MIN_TOKEN_CHARS or any(c.isspace() for c in raw.strip()):
        raise SettingsError(
            f"{name} must be at least {MIN_TOKEN_CHARS} characters without spaces "
            f"(e.g. `openssl rand -hex 16`); the value given is not shown"
        )
    return SecretStr(raw.strip())


ENVIRONMENT: dict[str, tuple[str, Parser]] = {
    "bootstrap_servers": ("KAFKA_BOOTSTRAP_SERVERS", servers),
    "app_id": ("LOOPWATCH_APP_ID", topic_name),
    "events_topic": ("LOOPWATCH_EVENTS_TOPIC", topic_name),
    "verdicts_topic": ("LOOPWATCH_VERDICTS_TOPIC", topic_name),
    "warnings_topic": ("LOOPWATCH_WARNINGS_TOPIC", topic_name),
    "dlq_topic": ("LOOPWATCH_DLQ_TOPIC", topic_name),
    "episodes_topic": ("LOOPWATCH_EPISODES_TOPIC", topic_name),
    "partitions": ("LOOPWATCH_PARTITIONS", integer(1)),
    "verdict_partitions": ("LOOPWATCH_VERDICT_PARTITIONS", integer(1)),
    "replication_factor": ("LOOPWATCH_REPLICATION_FACTOR", integer(1)),
    "events_retention_seconds": ("LOOPWATCH_EVENTS_RETENTION_SECONDS", integer(1, (-1,))),
    "verdicts_retention_seconds": ("LOOPWATCH_VERDICTS_RETENTION_SECONDS", integer(1, (-1,))),
    "warnings_retention_seconds": ("LOOPWATCH_WARNINGS_RETENTION_SECONDS", integer(1, (-1,))),
    "dlq_retention_seconds": ("LOOPWATCH_DLQ_RETENTION_SECONDS", integer(1, (-1,))),
    "config_topic": ("LOOPWATCH_CONFIG_TOPIC", topic_name),
    "profile": ("LOOPWATCH_PROFILE", choice("seed", "extended")),
    "episodes_retention_seconds": (
        "LOOPWATCH_EPISODES_RETENTION_SECONDS",
        integer(1, (-1,)),
    ),
    "threshold": ("LOOPWATCH_THRESHOLD", integer(1)),
    "mutating_failure_threshold": ("LOOPWATCH_MUTATING_FAILURE_THRESHOLD", integer(1)),
    "call_in_turn_threshold": ("LOOPWATCH_CALL_IN_TURN_THRESHOLD", integer(1)),
    "cycle_threshold": ("LOOPWATCH_CYCLE_THRESHOLD", integer(1)),
    "error_threshold": ("LOOPWATCH_ERROR_THRESHOLD", integer(1)),
    "call_floor_threshold": ("LOOPWATCH_CALL_FLOOR_THRESHOLD", integer(1)),
    "message_threshold": ("LOOPWATCH_MESSAGE_THRESHOLD", integer(1)),
    "condensation_threshold": ("LOOPWATCH_CONDENSATION_THRESHOLD", integer(1)),
    "result_aware_batches": ("LOOPWATCH_RESULT_AWARE_BATCHES", boolean),
    **{f"rule_{rule}": (f"LOOPWATCH_RULE_{rule.upper()}", switch) for rule in ALL_RULES},
    "session_ttl_seconds": ("LOOPWATCH_SESSION_TTL_SECONDS", integer(1)),
    "ended_retention_seconds": ("LOOPWATCH_ENDED_RETENTION_SECONDS", integer(0)),
    "max_event_bytes": ("LOOPWATCH_MAX_EVENT_BYTES", integer(1)),
    "store_url": ("LOOPWATCH_STORE", store),
    "data_dir": ("LOOPWATCH_DATA_DIR", text),
    "standby_replicas": ("LOOPWATCH_STANDBY_REPLICAS", integer(0, maximum=MAX_STANDBY_REPLICAS)),
    "rocksdb_cache_mb": ("LOOPWATCH_ROCKSDB_CACHE_MB", integer(8)),
    "session_cache": ("LOOPWATCH_SESSION_CACHE", integer(0, maximum=MAX_SESSION_CACHE)),
    "processing_guarantee": (
        "LOOPWATCH_PROCESSING_GUARANTEE",
        choice("at_least_once", "exactly_once"),
    ),
    "output_linger_ms": ("LOOPWATCH_OUTPUT_LINGER_MS", milliseconds(0, MAX_LINGER_MS)),
    "fetch_wait_ms": ("LOOPWATCH_FETCH_WAIT_MS", milliseconds(0, MAX_FETCH_WAIT_MS)),
    "batch_hand_off": ("LOOPWATCH_BATCH_HAND_OFF", boolean),
    "changelog_batches": ("LOOPWATCH_CHANGELOG_BATCHES", boolean),
    "commit_interval_ms": ("LOOPWATCH_COMMIT_INTERVAL_MS", milliseconds(100, 60_000)),
    "worker_id": ("LOOPWATCH_WORKER_ID", topic_name),  # Kafka allows the same characters
    "session_timeout_ms": (
        "LOOPWATCH_SESSION_TIMEOUT_MS",
        milliseconds(MIN_SESSION_TIMEOUT_MS, MAX_SESSION_TIMEOUT_MS),
    ),
    "heartbeat_interval_ms": ("LOOPWATCH_HEARTBEAT_INTERVAL_MS", milliseconds(100, 30_000)),
    "rebalance_timeout_ms": (
        "LOOPWATCH_REBALANCE_TIMEOUT_MS",
        milliseconds(MIN_SESSION_TIMEOUT_MS, MAX_SESSION_TIMEOUT_MS),
    ),
    "log_format": ("LOOPWATCH_LOG_FORMAT", choice("text", "json")),
    "web_host": ("LOOPWATCH_WEB_HOST", text),
    "web_port": ("LOOPWATCH_WEB_PORT", port),
    "dashboard_token": ("LOOPWATCH_DASHBOARD_TOKEN", _token),
    "security_protocol": (
        "KAFKA_SECURITY_PROTOCOL",
        choice("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL", upper=True),
    ),
    "sasl_mechanism": (
        "KAFKA_SASL_MECHANISM",
        choice("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", upper=True),
    ),
    "sasl_username": ("KAFKA_SASL_USERNAME", text),
    "sasl_password": ("KAFKA_SASL_PASSWORD", secret),
    "ssl_cafile": ("KAFKA_SSL_CAFILE", existing_file),
    "ssl_certfile": ("KAFKA_SSL_CERTFILE", existing_file),
    "ssl_keyfile": ("KAFKA_SSL_KEYFILE", existing_file),
}
"""Settings field → (environment variable, parser that validates its text)."""

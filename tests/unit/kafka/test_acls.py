"""`loopwatch acls`: each role's rights follow the configured names, and print as
`kafka-acls.sh` commands (the rights themselves are tested on the secured broker)."""

from __future__ import annotations

import pytest

from loopwatch.streams.cli import main
from loopwatch.streams.kafka.acls import Names, grants, kafka_acls_command, role_rights
from loopwatch.streams.otel.settings import OtelSettings

TENANT = {
    "LOOPWATCH_APP_ID": "tenant-a.loopwatch",
    "LOOPWATCH_EVENTS_TOPIC": "tenant-a.agent-events",
    "LOOPWATCH_VERDICTS_TOPIC": "tenant-a.loop-verdicts",
    "LOOPWATCH_WARNINGS_TOPIC": "tenant-a.loop-warnings",
    "LOOPWATCH_OTEL_APP_ID": "tenant-a.bridge",
}


def _names(env: dict[str, str]) -> Names:
    bridge = OtelSettings.from_env(env)
    return Names.of(bridge.base, bridge)


def test_a_runtime_may_only_write_events_read_verdicts_and_claim_its_group() -> None:
    rights = role_rights("runtime", _names(TENANT))
    assert rights == [
        ("topic", "tenant-a.agent-events", ("WRITE",), "literal"),
        ("topic", "tenant-a.loop-verdicts", ("READ",), "literal"),
        ("group", "loopwatch-runtimes.tenant-a.loop-verdicts", ("READ",), "literal"),
    ]


def test_the_worker_writes_outputs_reads_inputs_and_owns_its_changelog() -> None:
    rights = {(kind, name): ops for kind, name, ops, _ in role_rights("worker", _names(TENANT))}
    assert rights[("topic", "tenant-a.agent-events")] == ("READ",)
    assert rights[("topic", "tenant-a.loop-verdicts")] == ("WRITE",)
    assert rights[("topic", "tenant-a.loopwatch-sessions-changelog")] == ("READ", "WRITE")
    assert rights[("group", "tenant-a.loopwatch")] == ("READ",)
    assert not any(kind == "transactional-id" for kind, _ in rights)


def test_exactly_once_adds_the_workers_transactional_ids_by_prefix() -> None:
    names = _names({**TENANT, "LOOPWATCH_PROCESSING_GUARANTEE": "exactly_once"})
    assert ("transactional-id", "tenant-a.loopwatch-", ("WRITE",), "prefixed") in role_rights(
        "worker", names
    )


def test_no_role_but_the_admin_may_create_and_no_right_is_a_prefix_otherwise() -> None:
    every = grants(_names(TENANT), {})
    assert {g.role for g in every if "CREATE" in g.operations} == {"admin"}
    assert {g.pattern for g in every} == {"literal"}


def test_a_grant_prints_as_a_kafka_acls_command() -> None:
    grant = grants(_names(TENANT), {"runtime": "User:tenant-a-runtime"}, ["runtime"])[1]
    assert kafka_acls_command(grant, "k:9092", "admin.properties") == (
        "kafka-acls.sh --bootstrap-server k:9092 --command-config admin.properties --add "
        "--allow-principal User:tenant-a-runtime --operation Read "
        "--topic tenant-a.loop-verdicts --resource-pattern-type literal"
    )


def test_the_command_prints_the_chosen_roles(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in TENANT.items():
        monkeypatch.setenv(key, value)
    assert main(["acls", "--role", "dashboard", "--principal", "dashboard=ops-page"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# dashboard (User:ops-page)\n")
    assert out.count("kafka-acls.sh") == 2 and "tenant-a.loop-warnings" in out


def test_a_bad_principal_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["acls", "--principal", "janitor=User:x"])
    assert exit_.value.code == 2
    assert "ROLE=PRINCIPAL" in capsys.readouterr().err

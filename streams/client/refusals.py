"""Why the client cannot use Kafka, in one log line, and aiokafka kept quiet meanwhile.

The client stays fail-open whatever the cause (docs/client.md): it retries every
`probe_interval`. A cause that retrying never fixes (a refused login, an untrusted or
expired certificate, a missing ACL) is still worth one clear line naming what to change,
instead of aiokafka's own error at every retry. While a client has not connected (or
since its connection failed), `AiokafkaQuiet` drops aiokafka's warnings and errors; the
client's line stands for them.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Mapping
from typing import Any

from aiokafka.errors import (
    GroupAuthorizationFailedError,
    KafkaConnectionError,
    SaslAuthenticationFailed,
    TopicAuthorizationFailedError,
)

from loopwatch.streams.kafka.security import probe_connection


class MissingRight(RuntimeError):
    """The client's principal lacks a right it needs on a topic."""


def _causes(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def describe_failure(exc: BaseException) -> str:
    """One line on why connecting failed, naming what to change when retrying cannot help
    (never a secret: aiokafka's messages hold none)."""
    for cause in _causes(exc):
        if isinstance(cause, MissingRight):
            return str(cause)
        if isinstance(cause, SaslAuthenticationFailed):
            return (
                "Kafka refused the login: wrong password or unknown user "
                "(KAFKA_SASL_USERNAME / KAFKA_SASL_PASSWORD)"
            )
        if isinstance(cause, ssl.SSLCertVerificationError):
            return (
                f"the broker's certificate is not trusted ({cause.verify_message}): set "
                "KAFKA_SSL_CAFILE to the CA that signed it"
            )
        if isinstance(cause, ssl.SSLError):
            return (
                f"TLS with Kafka failed ({cause.reason or cause}): check KAFKA_SSL_CERTFILE "
                "and KAFKA_SSL_KEYFILE (expired, or not signed by a CA the broker trusts)"
            )
        if isinstance(cause, TopicAuthorizationFailedError | GroupAuthorizationFailedError):
            return (
                f"Kafka refused this principal a right ({cause}): grant the runtime's rights "
                "(`loopwatch acls --role runtime`)"
            )
    return type(exc).__name__


PROBE_SECONDS = 5.0
CONNECTION_OPTIONS = (
    "security_protocol",
    "ssl_context",
    "sasl_mechanism",
    "sasl_plain_username",
    "sasl_plain_password",
)


async def explain(exc: BaseException, options: Mapping[str, Any]) -> str:
    """`describe_failure(exc)`, or, when aiokafka only says it could not bootstrap (it
    logs the cause and raises without it), the cause one direct connection meets."""
    reason = describe_failure(exc)
    if not isinstance(exc, KafkaConnectionError) or reason != type(exc).__name__:
        return reason
    server = str(options.get("bootstrap_servers", "")).split(",")[0]
    host, _, port = server.rpartition(":")
    kwargs = {key: options[key] for key in CONNECTION_OPTIONS if key in options}
    try:
        await probe_connection(host.strip("[]"), int(port), PROBE_SECONDS, **kwargs)
    except Exception as refused:  # the cause, if it is one retrying cannot fix
        specific = describe_failure(refused)
        if specific != type(refused).__name__:
            return specific
    return reason


def missing_rights_message(missing: list[str]) -> str:
    return (
        f"this principal lacks {', '.join(missing)}, which a runtime needs: grant its "
        "rights (`loopwatch acls --role runtime`)"
    )


class AiokafkaQuiet(logging.Filter):
    """On every aiokafka logger: drops warnings and errors while some client is not
    connected (`hold`/`release` per client)."""

    _installed: AiokafkaQuiet | None = None

    def __init__(self) -> None:
        super().__init__()
        self.holders = 0

    @classmethod
    def installed(cls) -> AiokafkaQuiet:
        """The process's one filter, put on every aiokafka logger on first use (a
        logger's filter sees only its own records, not those of its children)."""
        if cls._installed is None:
            import aiokafka.consumer.group_coordinator  # noqa: PLC0415  (its loggers)
            import aiokafka.producer.sender  # noqa: F401, PLC0415

            quiet = cls._installed = cls()
            manager = logging.root.manager
            names = [name for name in manager.loggerDict if name.split(".")[0] == "aiokafka"]
            for name in ["aiokafka", *names]:
                logging.getLogger(name).addFilter(quiet)
        return cls._installed

    def hold(self) -> None:
        self.holders += 1

    def release(self) -> None:
        self.holders = max(0, self.holders - 1)

    def filter(self, record: logging.LogRecord) -> bool:
        return self.holders == 0 or record.levelno < logging.WARNING

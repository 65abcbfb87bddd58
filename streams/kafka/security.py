"""Why a secured broker refuses us, in one line that names the setting to fix.

aiokafka's clients log a refused login or a rejected certificate and retry until their
deadline: an operator sees a hang and a log full of retries. `refusal()` makes one
connection of its own to the first bootstrap server and tells a refusal (wrong password,
unknown user, a certificate the broker or we do not trust, an expired one) from a broker
that is merely not up yet (None: keep waiting). Messages never carry a secret.
"""

from __future__ import annotations

import asyncio
import ssl
from datetime import UTC, datetime
from typing import Any

from aiokafka.conn import AIOKafkaConnection
from aiokafka.errors import KafkaConnectionError, KafkaError, SaslAuthenticationFailed

from loopwatch.streams.settings import Settings

PROBE_TIMEOUT_SECONDS = 5.0
PROBE_CLOSE_SECONDS = 2.0
"""How long a probe waits for its socket to close (a refused TLS connection shuts down
in the background; left to it, the socket outlives the caller's event loop)."""


async def probe_connection(host: str, port: int, timeout: float, **options: Any) -> None:
    """One connection to `host:port` as aiokafka makes it (TLS, version lookup, SASL
    login), closed again; raises what aiokafka raised, TimeoutError after `timeout`. The
    socket, if one was opened, is closed (or `PROBE_CLOSE_SECONDS` passed) on return."""
    opened: list[object] = []
    conn = AIOKafkaConnection(
        host,
        port,
        request_timeout_ms=int(timeout * 1000),
        on_close=lambda *_: opened.append(True),  # called only if a socket was opened
        **options,
    )
    try:
        async with asyncio.timeout(timeout):
            await conn.connect()
    finally:
        closed = conn.close()
        if opened and closed is not None:
            await asyncio.wait({closed}, timeout=PROBE_CLOSE_SECONDS)


def certificate_expiry(path: str) -> datetime | None:
    """When the (first) certificate in `path` stops being valid; None if unreadable."""
    try:
        from cryptography import x509  # noqa: PLC0415  (optional: present in most venvs)

        with open(path, "rb") as handle:
            return x509.load_pem_x509_certificate(handle.read()).not_valid_after_utc
    except Exception:
        return None


def _own_certificate_problem(settings: Settings) -> str | None:
    if not settings.ssl_certfile:
        return None
    expiry = certificate_expiry(settings.ssl_certfile)
    if expiry is not None and expiry <= datetime.now(UTC):
        return (
            f"KAFKA_SSL_CERTFILE ({settings.ssl_certfile}) expired on "
            f"{expiry:%Y-%m-%d %H:%M} UTC; the broker refuses it"
        )
    return None


async def refusal(settings: Settings, timeout: float = PROBE_TIMEOUT_SECONDS) -> str | None:
    """A one-line reason if the broker refuses our credentials or certificate; None if it
    accepted them, or could not be asked (not listening yet, a timeout)."""
    if settings.security_protocol == "PLAINTEXT":
        return None
    kwargs = settings.aiokafka_kwargs()
    server = kwargs.pop("bootstrap_servers").split(",")[0]
    host, _, port = server.rpartition(":")
    host = host.strip("[]")
    try:
        await probe_connection(host, int(port), timeout, **kwargs)
        return None
    except SaslAuthenticationFailed:
        return (
            f"Kafka at {server} refused the login of KAFKA_SASL_USERNAME="
            f"{settings.sasl_username} with KAFKA_SASL_MECHANISM={settings.sasl_mechanism}: "
            "wrong KAFKA_SASL_PASSWORD or unknown user"
        )
    except ssl.SSLCertVerificationError as exc:
        return (
            f"the certificate of Kafka at {server} is not trusted "
            f"({exc.verify_message}); set KAFKA_SSL_CAFILE to the CA that signed it"
        )
    except KafkaConnectionError as exc:
        cause = exc.__cause__
        if isinstance(cause, ssl.SSLError):
            own = _own_certificate_problem(settings)
            if own:
                return own
            if not settings.ssl_certfile:
                return (
                    f"Kafka at {server} requires a client certificate: set "
                    "KAFKA_SSL_CERTFILE and KAFKA_SSL_KEYFILE"
                )
            return (
                f"Kafka at {server} refused the client certificate KAFKA_SSL_CERTFILE="
                f"{settings.ssl_certfile} ({cause.reason or 'TLS alert'}): it is not signed "
                "by a CA the broker trusts"
            )
        return None
    except ssl.SSLError as exc:
        return f"TLS with Kafka at {server} failed ({exc.reason or exc}); check KAFKA_SSL_*"
    except (KafkaError, OSError, TimeoutError):
        return None  # not listening yet, or slow: the caller's deadline decides

"""Creating ACLs through Kafka's CreateAcls request (`loopwatch acls --apply`).

aiokafka 0.14 has the request but no admin method for it, so one CreateAcls request per
(grant, operation) goes through the admin client's connection. Creating an ACL that
exists is a no-op for the broker, so applying twice is safe.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import for_code
from aiokafka.protocol.admin import CreateAclsRequest

from loopwatch.streams.kafka.acls import Grant
from loopwatch.streams.kafka.authorized import OPERATION_CODES

# Kafka's wire codes (org.apache.kafka.common.acl / resource)
RESOURCE_CODES = {"topic": 2, "group": 3, "cluster": 4, "transactional-id": 5}
PATTERN_CODES = {"literal": 3, "prefixed": 4}
ALLOW = 3
ANY_HOST = "*"
CLUSTER_AUTHORIZATION_FAILED = 31
SECURITY_DISABLED = 54


class AclError(RuntimeError):
    """The broker refused an ACL; the message says why and what to do."""


async def create_acls(
    admin: AIOKafkaAdminClient, grants: list[Grant], on_created: Callable[[Grant], None]
) -> None:
    """Create every grant's ACLs; AclError on the first refusal."""
    for grant in grants:
        for operation in grant.operations:
            request = CreateAclsRequest(
                RESOURCE_CODES[grant.resource],
                grant.name,
                PATTERN_CODES[grant.pattern],
                grant.principal,
                ANY_HOST,
                OPERATION_CODES[operation],
                ALLOW,
            )
            # the admin client's own request path (no public create_acls in aiokafka)
            response: Any = await admin._send_request(request)
            for code, message in response.creation_responses:
                if code == 0:
                    continue
                raise AclError(_refusal(code, message, grant, operation))
        on_created(grant)


def _refusal(code: int, message: str | None, grant: Grant, operation: str) -> str:
    if code == CLUSTER_AUTHORIZATION_FAILED:
        return (
            "this principal may not create ACLs (it needs ALTER on the cluster): run "
            "`loopwatch acls --apply` with the admin's KAFKA_SASL_USERNAME or certificate"
        )
    if code == SECURITY_DISABLED:
        return "the broker has no authorizer configured (authorizer.class.name): ACLs are off"
    reason = message or for_code(code).__name__
    what = f"{operation} on {grant.resource} {grant.name} for {grant.principal}"
    return f"creating the ACL {what} failed: {reason}"

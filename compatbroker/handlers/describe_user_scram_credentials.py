"""DescribeUserScramCredentials (API key 50), version 0: which SCRAM mechanisms each user has, with iterations.

Behaviour, as a Kafka (KRaft) broker answers:
- Cluster DESCRIBE is required; without it every entry, and the response, say CLUSTER_AUTHORIZATION_FAILED (with
  no message and no user names, as Kafka's error response leaves them).
- A null or empty user list describes every user that has a credential.
- A named user without credentials gets RESOURCE_NOT_FOUND ("Attempt to describe a user credential that does not
  exist: <user>"); a user named twice gets one entry with DUPLICATE_RESOURCE ("Cannot describe SCRAM credentials
  for the same user twice in a single request: <user>"). Entries follow the request's order.
- Credential infos list the user's mechanisms (1 SCRAM-SHA-256, 2 SCRAM-SHA-512) and iteration counts; the keys
  never leave the broker.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..protocol.error_codes import ErrorCode
from ..protocol.messages import DescribeUserScramCredentialsResponse
from ..security.acls.types import CLUSTER_NAME, AclOperation, ResourceType

if TYPE_CHECKING:
    from . import RequestContext

API_KEY = 50
MIN_VERSION = 0
MAX_VERSION = 0

Result = DescribeUserScramCredentialsResponse.DescribeUserScramCredentialsResult
CredentialInfo = DescribeUserScramCredentialsResponse.CredentialInfo


async def handle(ctx: RequestContext, request) -> DescribeUserScramCredentialsResponse:
    users = [user.name for user in request.users or ()]
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return DescribeUserScramCredentialsResponse(
            throttle_time_ms=0, error_code=code, error_message=None,
            results=[Result(user="", error_code=code, error_message=None) for _ in users])
    store = ctx.broker.security.scram
    return DescribeUserScramCredentialsResponse(
        throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
        results=[_describe(store, user, duplicated) for user, duplicated in _distinct(users or store.users())])


def _distinct(users: list[str]) -> list[tuple[str, bool]]:
    """Each user once, in first-mention order, with whether the request named it more than once."""
    counts: dict[str, int] = {}
    for user in users:
        counts[user] = counts.get(user, 0) + 1
    return [(user, count > 1) for user, count in counts.items()]


def _describe(store, user: str, duplicated: bool) -> Result:
    if duplicated:
        return Result(user=user, error_code=ErrorCode.DUPLICATE_RESOURCE,
                      error_message=f"Cannot describe SCRAM credentials for the same user twice in a single request: "
                                    f"{user}")
    infos = [CredentialInfo(mechanism=mechanism.type, iterations=iterations)
             for mechanism, iterations in store.describe(user)]
    if not infos:
        return Result(user=user, error_code=ErrorCode.RESOURCE_NOT_FOUND,
                      error_message=f"Attempt to describe a user credential that does not exist: {user}")
    return Result(user=user, error_code=ErrorCode.NONE, error_message=None, credential_infos=infos)

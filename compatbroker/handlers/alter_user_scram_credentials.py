"""AlterUserScramCredentials (API key 51), version 0: remove, create or replace users' SCRAM credentials.

Behaviour, as Kafka's controller (ScramControlManager) answers:
- Cluster ALTER is required; without it every user named gets CLUSTER_AUTHORIZATION_FAILED (no message; users
  sorted, as Kafka's error response lists them) and nothing changes.
- Each user may be altered once per request: a second deletion or upsertion for the same user makes that user's
  entry DUPLICATE_RESOURCE ("A user credential cannot be altered twice in the same request") and none of its
  alterations apply. Per alteration: an empty user name is UNACCEPTABLE_CREDENTIAL ("Username must not be empty"),
  a mechanism other than 1 (SCRAM-SHA-256) or 2 (SCRAM-SHA-512) UNSUPPORTED_SASL_MECHANISM ("Unknown SCRAM
  mechanism"), iterations below 4096 or above 16384 UNACCEPTABLE_CREDENTIAL ("Too few iterations" / "Too many
  iterations"), deleting a credential that does not exist RESOURCE_NOT_FOUND ("Attempt to delete a user credential
  that does not exist"). An empty salted password fails as Kafka's HMAC key does: UNKNOWN_SERVER_ERROR.
- The client sends the salted password (it ran PBKDF2); the broker stores the salt, iterations and the stored and
  server keys derived from it. The accepted alterations are written to the credential store as one update, after
  all checks; results list deletions, then upsertions, then refused users.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..protocol.error_codes import ErrorCode
from ..protocol.messages import AlterUserScramCredentialsResponse
from ..security.acls.types import CLUSTER_NAME, AclOperation, ResourceType
from ..security.scram_credentials import MECHANISMS_BY_TYPE, credential_from_salted, validate_alteration

if TYPE_CHECKING:
    from . import RequestContext

API_KEY = 51
MIN_VERSION = 0
MAX_VERSION = 0

log = logging.getLogger(__name__)
Result = AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult
DUPLICATE = (ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")
NOT_FOUND = (ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")


async def handle(ctx: RequestContext, request) -> AlterUserScramCredentialsResponse:
    if not ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        users = sorted({item.name for item in (*request.deletions, *request.upsertions)})
        return AlterUserScramCredentialsResponse(throttle_time_ms=0, results=[
            Result(user=user, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message=None)
            for user in users])
    store = ctx.broker.security.scram
    deletions, upsertions, errors = _check(store, request)
    accepted = [*deletions, *upsertions]
    if accepted:
        try:
            store.apply([(user, MECHANISMS_BY_TYPE[item.mechanism]) for user, item in deletions.items()],
                        [(user, MECHANISMS_BY_TYPE[item.mechanism],
                          credential_from_salted(MECHANISMS_BY_TYPE[item.mechanism], item.salt,
                                                 item.salted_password, item.iterations))
                         for user, item in upsertions.items()])
        except OSError as exc:
            log.error("Could not write the SCRAM credentials of %s: %s", ", ".join(accepted), exc)
            errors.update({user: (ErrorCode.UNKNOWN_SERVER_ERROR, None) for user in accepted})
            accepted = []
    return AlterUserScramCredentialsResponse(throttle_time_ms=0, results=[
        *(Result(user=user, error_code=ErrorCode.NONE, error_message=None) for user in accepted),
        *(Result(user=user, error_code=code, error_message=message) for user, (code, message) in errors.items())])


def _check(store, request) -> tuple[dict, dict, dict]:
    """ScramControlManager.alterCredentials' checks: (user -> deletion, user -> upsertion, user -> error)."""
    deletions: dict = {}
    upsertions: dict = {}
    errors: dict[str, tuple[int, str | None]] = {}
    for deletion in request.deletions:
        user = deletion.name
        if user in errors:
            continue
        if deletions.pop(user, None) is not None:
            errors[user] = DUPLICATE
            continue
        problem = validate_alteration(user, deletion.mechanism)
        if problem is None and store.get(user, deletion.mechanism) is None:
            problem = NOT_FOUND
        if problem is not None:
            errors[user] = problem
        else:
            deletions[user] = deletion
    for upsertion in request.upsertions:
        user = upsertion.name
        if user in errors:
            continue
        if deletions.pop(user, None) is not None or upsertions.pop(user, None) is not None:
            errors[user] = DUPLICATE
            continue
        problem = validate_alteration(user, upsertion.mechanism, upsertion.iterations)
        if problem is None and not upsertion.salted_password:
            problem = (ErrorCode.UNKNOWN_SERVER_ERROR, None)  # Java refuses an empty HMAC key
        if problem is not None:
            errors[user] = problem
        else:
            upsertions[user] = upsertion
    return deletions, upsertions, errors

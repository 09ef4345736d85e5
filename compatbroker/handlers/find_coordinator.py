"""FindCoordinator (API key 10), versions 0-6: which node coordinates a group or a transactional id.

The coordinator of a group is the leader of its partition of `__consumer_offsets`, that of a transactional id the
leader of its partition of `__transaction_state` (the partition is `abs(hashCode(key)) % partitions`); the answer
is that node's id and its advertised endpoint on the listener the request came in on, for key type 0 (group) and
1 (transaction). Versions 0-3 ask for one key (v0 always a group); from v4 a batch of keys, each answered on its
own (KIP-699). Versions 1-3 carry an error message: "NONE" on success, as Kafka sends.

The internal topic is created on the first lookup, as Kafka does, with `offsets.topic.replication.factor` /
`transaction.state.log.replication.factor` replicas (at most the number of live nodes). A single node does not
create it here: it coordinates every key, and the topic comes with the first write (as before cluster mode).

Authorization, as Kafka's, before anything else is looked at (the internal topic is not created for a key the
principal may not see): a group key needs DESCRIBE on the group (else GROUP_AUTHORIZATION_FAILED), a transactional
id DESCRIBE on the transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED); each key of a batch on its own.
A v6 share-group key needs CLUSTER_ACTION on the cluster (else CLUSTER_AUTHORIZATION_FAILED, as Kafka's refusal of
the whole request answers every key), and is then INVALID_REQUEST as below.

Errors: COORDINATOR_NOT_AVAILABLE while the key's partition has no leader (or its topic cannot be created).
Key type 2 (share group) is INVALID_REQUEST, as Kafka answers without a share coordinator (and before v6 always);
so is any other key type.

Deviation: Kafka answers COORDINATOR_NOT_AVAILABLE to the lookup that creates the internal topic; here the topic
is created in-process at once, so that lookup already answers the new leader.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..coordinator import coordinator_of
from ..coordinator.ownership import is_cluster_of_one
from ..coordinator.transactions import transactions_of
from ..protocol.error_codes import ErrorCode
from ..protocol.messages import FindCoordinatorResponse
from ..security.acls.types import CLUSTER_NAME, AclOperation, ResourceType
from ..topic_names import GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC

if TYPE_CHECKING:
    from . import RequestContext

API_KEY = 10
MIN_VERSION = 0
MAX_VERSION = 6

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1
SHARE_KEY_TYPE = 2
NO_NODE = (-1, "", -1)  # Kafka's Node.noNode(): id, host, port
SUCCESS_MESSAGE = "NONE"  # Kafka's Errors.NONE.message()

log = logging.getLogger(__name__)

Coordinator = FindCoordinatorResponse.Coordinator


async def handle(ctx: RequestContext, request) -> FindCoordinatorResponse:
    coordinator_of(ctx.broker)  # a client's first group request follows: have the coordinator loading already
    if ctx.api_version >= 4:
        coordinators = []
        for key in request.coordinator_keys:
            error, (node_id, host, port) = _find(ctx, request.key_type, key)
            coordinators.append(Coordinator(key=key, node_id=node_id, host=host, port=port, error_code=error,
                                            error_message="" if error is ErrorCode.NONE else error.message))
        return FindCoordinatorResponse(coordinators=coordinators)
    error, (node_id, host, port) = _find(ctx, request.key_type, request.key)
    message = SUCCESS_MESSAGE if error is ErrorCode.NONE else error.message
    return FindCoordinatorResponse(error_code=error, error_message=message, node_id=node_id, host=host, port=port)


def _find(ctx: RequestContext, key_type: int, key: str) -> tuple[ErrorCode, tuple[int, str, int]]:
    """(error, (node id, host, port)) of the key's coordinator."""
    refusal = _authorization_error(ctx, key_type, key)
    if refusal is not None:
        return refusal, NO_NODE
    if key_type == GROUP_KEY_TYPE:
        coordinator = coordinator_of(ctx.broker).offsets
        topic = GROUP_METADATA_TOPIC
    elif key_type == TRANSACTION_KEY_TYPE:
        coordinator = transactions_of(ctx.broker)
        topic = TRANSACTION_STATE_TOPIC
    else:
        return ErrorCode.INVALID_REQUEST, NO_NODE
    node = ctx.broker
    if node.topic(topic) is None:
        if is_cluster_of_one(node):
            return _endpoint(ctx, node.node_id)
        try:
            coordinator.create_topic()
        except Exception as exc:  # noqa: BLE001 - too few nodes, a full disk: clients retry the lookup
            log.warning("could not create %s: %s", topic, exc)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, NO_NODE
    state = node.partition_state(topic, coordinator.partition_for(key))
    if state is None or state.leader < 0:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, NO_NODE
    return _endpoint(ctx, state.leader)


def _authorization_error(ctx: RequestContext, key_type: int, key: str) -> ErrorCode | None:
    """Kafka's check of a key: DESCRIBE on its group or transactional id; for a share group (v6), CLUSTER_ACTION."""
    if key_type == SHARE_KEY_TYPE and ctx.api_version >= 6 and not ctx.authorize(
            AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    if key_type == GROUP_KEY_TYPE and not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, key):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED
    if key_type == TRANSACTION_KEY_TYPE and not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                                                              key):
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    return None


def _endpoint(ctx: RequestContext, node_id: int) -> tuple[ErrorCode, tuple[int, str, int]]:
    endpoint = ctx.broker.endpoint_of(node_id, ctx.listener_host, ctx.listener_port)
    if endpoint is None:  # a node without a listener the client can reach
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, NO_NODE
    host, port = endpoint
    return ErrorCode.NONE, (node_id, host, port)

"""Which operations apply to each resource type (Kafka's AclEntry.supportedOperations), and the 32-bit field the
`*_authorized_operations` response fields carry them in (bit n set: the operation with code n is allowed)."""
from __future__ import annotations

from collections.abc import Iterable

from .acls.types import AclOperation as Op, ResourceType

_SUPPORTED = {
    ResourceType.TOPIC: (Op.READ, Op.WRITE, Op.CREATE, Op.DESCRIBE, Op.DELETE, Op.ALTER, Op.DESCRIBE_CONFIGS,
                         Op.ALTER_CONFIGS),
    ResourceType.GROUP: (Op.READ, Op.DESCRIBE, Op.DELETE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS),
    ResourceType.CLUSTER: (Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, Op.IDEMPOTENT_WRITE,
                           Op.ALTER, Op.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (Op.DESCRIBE, Op.WRITE),
    ResourceType.DELEGATION_TOKEN: (Op.DESCRIBE,),
    ResourceType.USER: (Op.CREATE_TOKENS, Op.DESCRIBE_TOKENS),
}


def supported_operations(resource_type: ResourceType) -> tuple[Op, ...]:
    """The operations an ACL on a resource of this (concrete) type can allow; ValueError for ANY or UNKNOWN."""
    try:
        return _SUPPORTED[resource_type]
    except KeyError:
        raise ValueError(f"{resource_type!r} is not a concrete resource type") from None


def operations_field(operations: Iterable[Op]) -> int:
    """The operations as a signed 32-bit field, bit n for the operation with code n."""
    field = 0
    for operation in operations:
        field |= 1 << int(operation)
    return field - (1 << 32) if field >= 1 << 31 else field

"""Kafka's protocol error codes, numbered and named exactly as Apache Kafka 4.3 defines them.

Every response carries failures as an int16 error code. Clients decide from the code alone whether
to retry, refresh metadata or give up, so the broker must use Kafka's numbers; the names are kept
too, so that logs and tests read like Kafka's own. Each code also knows whether Kafka's clients
treat it as retriable, and a short explanation meant for log lines and error_message fields.
"""

from __future__ import annotations

import enum
import types


@enum.unique
class ErrorCode(enum.IntEnum):
    """An error code as sent on the wire (int16)."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_FETCH_SIZE = 4
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    REPLICA_NOT_AVAILABLE = 9
    MESSAGE_TOO_LARGE = 10
    STALE_CONTROLLER_EPOCH = 11
    OFFSET_METADATA_TOO_LARGE = 12
    NETWORK_EXCEPTION = 13
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_SASL_MECHANISM = 33
    ILLEGAL_SASL_STATE = 34
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
    POLICY_VIOLATION = 44
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    INVALID_TRANSACTION_TIMEOUT = 50
    CONCURRENT_TRANSACTIONS = 51
    TRANSACTION_COORDINATOR_FENCED = 52
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    SECURITY_DISABLED = 54
    OPERATION_NOT_ATTEMPTED = 55
    KAFKA_STORAGE_ERROR = 56
    LOG_DIR_NOT_FOUND = 57
    SASL_AUTHENTICATION_FAILED = 58
    UNKNOWN_PRODUCER_ID = 59
    REASSIGNMENT_IN_PROGRESS = 60
    DELEGATION_TOKEN_AUTH_DISABLED = 61
    DELEGATION_TOKEN_NOT_FOUND = 62
    DELEGATION_TOKEN_OWNER_MISMATCH = 63
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = 64
    DELEGATION_TOKEN_AUTHORIZATION_FAILED = 65
    DELEGATION_TOKEN_EXPIRED = 66
    INVALID_PRINCIPAL_TYPE = 67
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    FETCH_SESSION_ID_NOT_FOUND = 70
    INVALID_FETCH_SESSION_EPOCH = 71
    LISTENER_NOT_FOUND = 72
    TOPIC_DELETION_DISABLED = 73
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    UNSUPPORTED_COMPRESSION_TYPE = 76
    STALE_BROKER_EPOCH = 77
    OFFSET_NOT_AVAILABLE = 78
    MEMBER_ID_REQUIRED = 79
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    NO_REASSIGNMENT_IN_PROGRESS = 85
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    INVALID_RECORD = 87
    UNSTABLE_OFFSET_COMMIT = 88
    THROTTLING_QUOTA_EXCEEDED = 89
    PRODUCER_FENCED = 90
    RESOURCE_NOT_FOUND = 91
    DUPLICATE_RESOURCE = 92
    UNACCEPTABLE_CREDENTIAL = 93
    INCONSISTENT_VOTER_SET = 94
    INVALID_UPDATE_VERSION = 95
    FEATURE_UPDATE_FAILED = 96
    PRINCIPAL_DESERIALIZATION_FAILURE = 97
    SNAPSHOT_NOT_FOUND = 98
    POSITION_OUT_OF_RANGE = 99
    UNKNOWN_TOPIC_ID = 100
    DUPLICATE_BROKER_REGISTRATION = 101
    BROKER_ID_NOT_REGISTERED = 102
    INCONSISTENT_TOPIC_ID = 103
    INCONSISTENT_CLUSTER_ID = 104
    TRANSACTIONAL_ID_NOT_FOUND = 105
    FETCH_SESSION_TOPIC_ID_ERROR = 106
    INELIGIBLE_REPLICA = 107
    NEW_LEADER_ELECTED = 108
    OFFSET_MOVED_TO_TIERED_STORAGE = 109
    FENCED_MEMBER_EPOCH = 110
    UNRELEASED_INSTANCE_ID = 111
    UNSUPPORTED_ASSIGNOR = 112
    STALE_MEMBER_EPOCH = 113
    MISMATCHED_ENDPOINT_TYPE = 114
    UNSUPPORTED_ENDPOINT_TYPE = 115
    UNKNOWN_CONTROLLER_ID = 116
    UNKNOWN_SUBSCRIPTION_ID = 117
    TELEMETRY_TOO_LARGE = 118
    INVALID_REGISTRATION = 119
    TRANSACTION_ABORTABLE = 120
    INVALID_RECORD_STATE = 121
    SHARE_SESSION_NOT_FOUND = 122
    INVALID_SHARE_SESSION_EPOCH = 123
    FENCED_STATE_EPOCH = 124
    INVALID_VOTER_KEY = 125
    DUPLICATE_VOTER = 126
    VOTER_NOT_FOUND = 127
    INVALID_REGULAR_EXPRESSION = 128
    REBOOTSTRAP_REQUIRED = 129
    STREAMS_INVALID_TOPOLOGY = 130
    STREAMS_INVALID_TOPOLOGY_EPOCH = 131
    STREAMS_TOPOLOGY_FENCED = 132
    SHARE_SESSION_LIMIT_REACHED = 133

    @property
    def retriable(self) -> bool:
        """Whether Kafka's clients retry a request that failed with this code."""
        return _DETAILS[self][0]

    @property
    def message(self) -> str:
        """A one-line explanation of the code, for logs and error_message fields."""
        return _DETAILS[self][1]

    @classmethod
    def for_code(cls, code: int) -> ErrorCode:
        """The member for a wire value; codes this table lacks read as UNKNOWN_SERVER_ERROR, as in Kafka's clients."""
        try:
            return cls(code)
        except ValueError:
            return cls.UNKNOWN_SERVER_ERROR


# Read-only so that no caller can change what a code means at run time.
_DETAILS: types.MappingProxyType[ErrorCode, tuple[bool, str]] = types.MappingProxyType({
    ErrorCode.UNKNOWN_SERVER_ERROR: (False, "The broker hit an unexpected failure while handling the request."),
    ErrorCode.NONE: (False, "Success."),
    ErrorCode.OFFSET_OUT_OF_RANGE: (False, "The requested offset lies outside the partition's current log."),
    ErrorCode.CORRUPT_MESSAGE: (True, "A record or batch is corrupt: bad CRC, bad size, or a null key on a compacted topic."),
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: (True, "No replica of that topic partition lives on this broker, or the topic does not exist."),
    ErrorCode.INVALID_FETCH_SIZE: (False, "The fetch size in the request is not acceptable."),
    ErrorCode.LEADER_NOT_AVAILABLE: (True, "The partition has no leader right now, typically during a leader election."),
    ErrorCode.NOT_LEADER_OR_FOLLOWER: (True, "This broker is not the partition's leader, or not a replica of it at all."),
    ErrorCode.REQUEST_TIMED_OUT: (True, "The request did not complete before its timeout."),
    ErrorCode.BROKER_NOT_AVAILABLE: (False, "The target broker cannot be reached."),
    ErrorCode.REPLICA_NOT_AVAILABLE: (True, "The requested replica is not present on this broker."),
    ErrorCode.MESSAGE_TOO_LARGE: (False, "A record is larger than the broker accepts."),
    ErrorCode.STALE_CONTROLLER_EPOCH: (False, "The request came from a controller that has since been replaced."),
    ErrorCode.OFFSET_METADATA_TOO_LARGE: (False, "The metadata string attached to an offset commit is too long."),
    ErrorCode.NETWORK_EXCEPTION: (True, "The connection dropped while the request was in flight."),
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: (True, "The coordinator is still replaying its log after taking over and cannot answer yet."),
    ErrorCode.COORDINATOR_NOT_AVAILABLE: (True, "No coordinator is currently available for this group or transactional id."),
    ErrorCode.NOT_COORDINATOR: (True, "This broker is not the coordinator for the group or transactional id."),
    ErrorCode.INVALID_TOPIC_EXCEPTION: (False, "The topic name is illegal or the operation is not allowed on this topic."),
    ErrorCode.RECORD_LIST_TOO_LARGE: (False, "A record batch is bigger than the log segment size allows."),
    ErrorCode.NOT_ENOUGH_REPLICAS: (True, "Too few in-sync replicas are left to accept the write."),
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: (True, "The write was appended, but fewer in-sync replicas than required acknowledged it."),
    ErrorCode.INVALID_REQUIRED_ACKS: (False, "The acks value of the produce request is not allowed."),
    ErrorCode.ILLEGAL_GENERATION: (False, "The group generation id in the request is not the current one."),
    ErrorCode.INCONSISTENT_GROUP_PROTOCOL: (False, "The member's protocol type or protocols are empty or do not match the group's."),
    ErrorCode.INVALID_GROUP_ID: (False, "The group id is empty or otherwise unusable."),
    ErrorCode.UNKNOWN_MEMBER_ID: (False, "The member id is not registered in the group, for example because the member was removed."),
    ErrorCode.INVALID_SESSION_TIMEOUT: (False, "The session timeout is outside the range the broker allows."),
    ErrorCode.REBALANCE_IN_PROGRESS: (False, "A rebalance has started, and the member must join the group again."),
    ErrorCode.INVALID_COMMIT_OFFSET_SIZE: (False, "The offset commit data has an unacceptable size."),
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: (False, "The caller is not authorized for this topic."),
    ErrorCode.GROUP_AUTHORIZATION_FAILED: (False, "The caller is not authorized for this group."),
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: (False, "The caller is not authorized for this cluster-wide operation."),
    ErrorCode.INVALID_TIMESTAMP: (False, "A record timestamp is outside the accepted range."),
    ErrorCode.UNSUPPORTED_SASL_MECHANISM: (False, "The SASL mechanism the client asked for is not enabled on this listener."),
    ErrorCode.ILLEGAL_SASL_STATE: (False, "The request is not allowed at this point of the SASL exchange."),
    ErrorCode.UNSUPPORTED_VERSION: (False, "The broker does not support this API version."),
    ErrorCode.TOPIC_ALREADY_EXISTS: (False, "The topic to be created is already there."),
    ErrorCode.INVALID_PARTITIONS: (False, "The requested number of partitions is not acceptable."),
    ErrorCode.INVALID_REPLICATION_FACTOR: (False, "The replication factor must be at least 1 and at most the number of live brokers."),
    ErrorCode.INVALID_REPLICA_ASSIGNMENT: (False, "The explicit replica placement in the request cannot be used."),
    ErrorCode.INVALID_CONFIG: (False, "A configuration entry is not acceptable."),
    ErrorCode.NOT_CONTROLLER: (True, "This broker is not the active controller."),
    ErrorCode.INVALID_REQUEST: (False, "The request is malformed or does not fit this broker; the broker log has the details."),
    ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT: (False, "The request needs a newer message format than the topic uses."),
    ErrorCode.POLICY_VIOLATION: (False, "The request breaks a policy configured on the broker."),
    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER: (False, "The producer's sequence number skips ahead of what the broker expects."),
    ErrorCode.DUPLICATE_SEQUENCE_NUMBER: (False, "The producer's sequence number has been written before."),
    ErrorCode.INVALID_PRODUCER_EPOCH: (False, "The producer epoch is older than the current one."),
    ErrorCode.INVALID_TXN_STATE: (False, "The transactional operation is not allowed in the transaction's current state."),
    ErrorCode.INVALID_PRODUCER_ID_MAPPING: (False, "This transactional id is currently bound to a different producer id."),
    ErrorCode.INVALID_TRANSACTION_TIMEOUT: (False, "The requested transaction timeout is above transaction.max.timeout.ms."),
    ErrorCode.CONCURRENT_TRANSACTIONS: (True, "Another operation on the same transaction is still in progress."),
    ErrorCode.TRANSACTION_COORDINATOR_FENCED: (False, "The transaction coordinator that sent the markers has been replaced."),
    ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: (False, "The caller is not authorized for this transactional id."),
    ErrorCode.SECURITY_DISABLED: (False, "The broker has its security features turned off."),
    ErrorCode.OPERATION_NOT_ATTEMPTED: (False, "The broker skipped this operation because another one in the same request failed."),
    ErrorCode.KAFKA_STORAGE_ERROR: (True, "A disk error prevented access to the log."),
    ErrorCode.LOG_DIR_NOT_FOUND: (False, "The broker has no log directory with the given path."),
    ErrorCode.SASL_AUTHENTICATION_FAILED: (False, "The SASL credentials were rejected."),
    ErrorCode.UNKNOWN_PRODUCER_ID: (False, "The broker has no state for this producer id, for example because its records expired."),
    ErrorCode.REASSIGNMENT_IN_PROGRESS: (False, "Another partition reassignment is already running."),
    ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED: (False, "This cluster has no delegation token support switched on."),
    ErrorCode.DELEGATION_TOKEN_NOT_FOUND: (False, "The delegation token does not exist."),
    ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH: (False, "The principal is neither the owner nor a renewer of the delegation token."),
    ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED: (False, "Delegation tokens cannot be managed over plaintext or one-way TLS connections, nor over connections that authenticated with a token."),
    ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED: (False, "The caller is not authorized for this delegation token operation."),
    ErrorCode.DELEGATION_TOKEN_EXPIRED: (False, "The delegation token's lifetime has run out."),
    ErrorCode.INVALID_PRINCIPAL_TYPE: (False, "The broker does not understand the principal type given, such as one other than User."),
    ErrorCode.NON_EMPTY_GROUP: (False, "The group still has members."),
    ErrorCode.GROUP_ID_NOT_FOUND: (False, "No group with this id exists."),
    ErrorCode.FETCH_SESSION_ID_NOT_FOUND: (True, "The broker does not know this incremental fetch session id."),
    ErrorCode.INVALID_FETCH_SESSION_EPOCH: (True, "The fetch session epoch does not match the broker's."),
    ErrorCode.LISTENER_NOT_FOUND: (True, "The leader has no listener matching the one the metadata request arrived on."),
    ErrorCode.TOPIC_DELETION_DISABLED: (False, "This cluster does not allow deleting topics."),
    ErrorCode.FENCED_LEADER_EPOCH: (True, "The caller's leader epoch is behind this broker's, so its metadata is stale."),
    ErrorCode.UNKNOWN_LEADER_EPOCH: (True, "The caller's leader epoch is ahead of this broker's, which has not caught up yet."),
    ErrorCode.UNSUPPORTED_COMPRESSION_TYPE: (False, "The data is compressed with a codec that the client's request version cannot decode."),
    ErrorCode.STALE_BROKER_EPOCH: (False, "The broker epoch in the request is out of date."),
    ErrorCode.OFFSET_NOT_AVAILABLE: (True, "A newly elected leader's high watermark has not caught up, so offsets cannot be served yet."),
    ErrorCode.MEMBER_ID_REQUIRED: (False, "The member must join again using the member id the coordinator just gave it."),
    ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE: (True, "The first replica in the assignment cannot become leader right now."),
    ErrorCode.GROUP_MAX_SIZE_REACHED: (False, "The group already has the maximum number of members."),
    ErrorCode.FENCED_INSTANCE_ID: (False, "Another member with the same group.instance.id has taken over this static member's place."),
    ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE: (True, "No eligible leader replica is available for the partition."),
    ErrorCode.ELECTION_NOT_NEEDED: (True, "The partition already has the desired leader, so no election is needed."),
    ErrorCode.NO_REASSIGNMENT_IN_PROGRESS: (False, "There is no partition reassignment to cancel."),
    ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC: (False, "A group's offsets for a topic cannot be deleted while the group subscribes to that topic."),
    ErrorCode.INVALID_RECORD: (False, "The broker rejected a record that failed its validation."),
    ErrorCode.UNSTABLE_OFFSET_COMMIT: (True, "Pending transactional offset commits must finish before offsets can be fetched."),
    ErrorCode.THROTTLING_QUOTA_EXCEEDED: (True, "The request went over the controller mutation quota."),
    ErrorCode.PRODUCER_FENCED: (False, "This producer was superseded by a newer instance using the same transactional id."),
    ErrorCode.RESOURCE_NOT_FOUND: (False, "The request mentions a resource that cannot be found."),
    ErrorCode.DUPLICATE_RESOURCE: (False, "The request names the same resource more than once."),
    ErrorCode.UNACCEPTABLE_CREDENTIAL: (False, "The credential to be stored, such as a SCRAM credential, fails the broker's requirements."),
    ErrorCode.INCONSISTENT_VOTER_SET: (False, "A KRaft voter-only request involved a replica outside the expected voter set."),
    ErrorCode.INVALID_UPDATE_VERSION: (False, "The update version is not acceptable."),
    ErrorCode.FEATURE_UPDATE_FAILED: (False, "Finalized features could not be updated because of a server-side failure."),
    ErrorCode.PRINCIPAL_DESERIALIZATION_FAILURE: (False, "The principal of a forwarded request could not be deserialized."),
    ErrorCode.SNAPSHOT_NOT_FOUND: (False, "The requested metadata snapshot does not exist."),
    ErrorCode.POSITION_OUT_OF_RANGE: (False, "The requested position falls outside the snapshot."),
    ErrorCode.UNKNOWN_TOPIC_ID: (True, "No topic with this topic id is known to this broker."),
    ErrorCode.DUPLICATE_BROKER_REGISTRATION: (False, "Another broker is already registered with this id."),
    ErrorCode.BROKER_ID_NOT_REGISTERED: (False, "No broker is registered with this id."),
    ErrorCode.INCONSISTENT_TOPIC_ID: (True, "The topic id in the request differs from the topic id of the log."),
    ErrorCode.INCONSISTENT_CLUSTER_ID: (False, "The cluster id in the request differs from this cluster's."),
    ErrorCode.TRANSACTIONAL_ID_NOT_FOUND: (False, "No transaction state exists for this transactional id."),
    ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR: (True, "The fetch session used topic ids inconsistently."),
    ErrorCode.INELIGIBLE_REPLICA: (False, "The proposed ISR contains a replica that is not eligible."),
    ErrorCode.NEW_LEADER_ELECTED: (False, "The partition state was updated, but leadership moved in the meantime."),
    ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE: (False, "That offset is no longer on local disk and must be read from remote storage."),
    ErrorCode.FENCED_MEMBER_EPOCH: (False, "The coordinator fenced this member's epoch; it must drop every partition and join again."),
    ErrorCode.UNRELEASED_INSTANCE_ID: (False, "Another member still holds this group.instance.id and has to leave first."),
    ErrorCode.UNSUPPORTED_ASSIGNOR: (False, "The group does not support the requested assignor or its version range."),
    ErrorCode.STALE_MEMBER_EPOCH: (False, "The member epoch is out of date; retry once a heartbeat has returned the current one."),
    ErrorCode.MISMATCHED_ENDPOINT_TYPE: (False, "The request went to a listener of the wrong kind, such as a controller listener instead of a broker one."),
    ErrorCode.UNSUPPORTED_ENDPOINT_TYPE: (False, "Requests over this kind of listener are not supported yet."),
    ErrorCode.UNKNOWN_CONTROLLER_ID: (False, "The id does not belong to any known controller."),
    ErrorCode.UNKNOWN_SUBSCRIPTION_ID: (False, "The telemetry subscription id is unknown or outdated."),
    ErrorCode.TELEMETRY_TOO_LARGE: (False, "The pushed telemetry is larger than the broker accepts."),
    ErrorCode.INVALID_REGISTRATION: (False, "The controller refused the broker's registration."),
    ErrorCode.TRANSACTION_ABORTABLE: (False, "The transaction failed; the client can abort it and keep using the transactional id."),
    ErrorCode.INVALID_RECORD_STATE: (False, "The record is not in a state that allows this acknowledgement."),
    ErrorCode.SHARE_SESSION_NOT_FOUND: (True, "The broker does not know this share session."),
    ErrorCode.INVALID_SHARE_SESSION_EPOCH: (True, "The share session epoch does not match the broker's."),
    ErrorCode.FENCED_STATE_EPOCH: (False, "The share-group state epoch does not match the share coordinator's."),
    ErrorCode.INVALID_VOTER_KEY: (False, "The voter's id and directory id do not match this replica."),
    ErrorCode.DUPLICATE_VOTER: (False, "The voter already belongs to the voter set."),
    ErrorCode.VOTER_NOT_FOUND: (False, "The voter does not belong to the voter set."),
    ErrorCode.INVALID_REGULAR_EXPRESSION: (False, "The subscription's regular expression cannot be parsed."),
    ErrorCode.REBOOTSTRAP_REQUIRED: (False, "The client's metadata is stale and it should bootstrap again."),
    ErrorCode.STREAMS_INVALID_TOPOLOGY: (False, "The streams topology is not acceptable."),
    ErrorCode.STREAMS_INVALID_TOPOLOGY_EPOCH: (False, "The streams topology epoch is not acceptable."),
    ErrorCode.STREAMS_TOPOLOGY_FENCED: (False, "A newer topology epoch has replaced the one in the request."),
    ErrorCode.SHARE_SESSION_LIMIT_REACHED: (True, "The broker already has the maximum number of share sessions open."),
})

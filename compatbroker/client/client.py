"""`KafkaClient`: a synchronous client of any Kafka-compatible cluster over compatbroker's own codecs.

    with KafkaClient(ClientConfig(bootstrap="localhost:9092")) as client:
        response = client.send(lambda version: MetadataRequest(topics=None), node_id=None)
        client.metadata(["orders"]).topics["orders"].partitions[0].leader

It keeps one connection per node (opened on first use, see connection.py), learns the cluster from Metadata, and
for every request picks the newest version that both this codec and that broker accept (ApiVersions), so it works
against Apache Kafka 2.x to 4.x as against compatbroker. Requests whose shape depends on the version are given as a
function of the version (`send(lambda v: ..., ...)`), so a caller fills fields old versions lack only when they
exist. `node_id=None` sends to any broker (a live connection, else the bootstrap servers in turn); a node id sends
to that broker; `leader()` and `coordinator()` find the node for a partition and for a group or transactional id.

When no bootstrap server accepts a TCP connection (a broker still starting, as in a script that runs `serve &` and
then a command), the client retries with backoff (100 ms doubling to 1 s, as Kafka's reconnect.backoff) until
request.timeout.ms has passed, calling `on_waiting(message)` once on the first failure ("waiting for HOST:PORT:
connection refused"; by default a warning on the `compatbroker.client.client` logger), then raises
KafkaConnectionError.

A request that fails on an already-open connection with a connection error (an idle connection the broker closed)
is sent again once on a fresh connection, except Produce. Errors are KafkaError and its subclasses (errors.py).
Not thread-safe: one client per thread.
"""
from __future__ import annotations

import time
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages.find_coordinator import FindCoordinatorRequest
from compatbroker.protocol.messages.metadata import MetadataRequest

from .config import ClientConfig
from .connection import BrokerConnection
from .errors import KafkaConnectionError, KafkaError, error_or_none

log = logging.getLogger(__name__)
METADATA = 3
FIND_COORDINATOR = 10
PRODUCE = 0
GROUP, TRANSACTION, SHARE = 0, 1, 2         # FindCoordinator key types
RETRY_BACKOFF_S = 0.1                       # Kafka's retry.backoff.ms and reconnect.backoff.ms
RECONNECT_BACKOFF_MAX_S = 1.0               # Kafka's reconnect.backoff.max.ms
_COORDINATOR_RETRIABLE = (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                          ErrorCode.NOT_COORDINATOR)


@dataclass
class BrokerMetadata:
    node_id: int
    host: str
    port: int
    rack: str | None = None

    def to_json(self) -> dict:
        """{"node_id", "host", "port", "rack"}"""
        return {"node_id": self.node_id, "host": self.host, "port": self.port, "rack": self.rack}


@dataclass
class PartitionMetadata:
    partition: int
    leader: int                      # -1: no leader
    leader_epoch: int = -1
    replicas: list[int] = field(default_factory=list)
    isr: list[int] = field(default_factory=list)
    offline: list[int] = field(default_factory=list)
    error: KafkaError | None = None

    def to_json(self) -> dict:
        """{"partition", "leader", "leader_epoch", "replicas", "isr", "offline", "error": null | {code,name,message}}"""
        return {"partition": self.partition, "leader": self.leader, "leader_epoch": self.leader_epoch,
                "replicas": list(self.replicas), "isr": list(self.isr), "offline": list(self.offline),
                "error": self.error.to_json() if self.error else None}


@dataclass
class TopicMetadata:
    name: str
    topic_id: str | None = None      # None when the broker's Metadata version has no topic ids (< v10)
    internal: bool = False
    partitions: dict[int, PartitionMetadata] = field(default_factory=dict)
    error: KafkaError | None = None

    def to_json(self) -> dict:
        """{"name", "topic_id", "internal", "error", "partitions": [partition's to_json, by partition]}"""
        return {"name": self.name, "topic_id": self.topic_id, "internal": self.internal,
                "error": self.error.to_json() if self.error else None,
                "partitions": [self.partitions[p].to_json() for p in sorted(self.partitions)]}


@dataclass
class ClusterMetadata:
    cluster_id: str | None
    controller_id: int
    brokers: dict[int, BrokerMetadata] = field(default_factory=dict)
    topics: dict[str, TopicMetadata] = field(default_factory=dict)

    def to_json(self) -> dict:
        """{"cluster_id", "controller_id", "brokers": [...], "topics": [...]} (lists sorted by id / name)"""
        return {"cluster_id": self.cluster_id, "controller_id": self.controller_id,
                "brokers": [self.brokers[b].to_json() for b in sorted(self.brokers)],
                "topics": [self.topics[t].to_json() for t in sorted(self.topics)]}


class KafkaClient:
    """See the module docstring. `KafkaClient(config)` or `KafkaClient(bootstrap="h:p", properties={...})`."""

    def __init__(self, config: ClientConfig | None = None, *, on_waiting: Callable[[str], None] | None = None,
                 **config_options):
        self.config = config if config is not None else ClientConfig(**config_options)
        self.on_waiting = on_waiting or _log_waiting
        self._waited = False
        self._connections: dict[int, BrokerConnection] = {}   # node id (negative: bootstrap address) -> connection
        self._brokers: dict[int, BrokerMetadata] = {}
        self._topics: dict[str, TopicMetadata] = {}
        self._coordinators: dict[tuple[int, str], int] = {}
        self.cluster_id: str | None = None
        self.controller_id = -1

    def __enter__(self) -> KafkaClient:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def close(self) -> None:
        """Closes every connection; the client may be used again (it reconnects)."""
        for connection in self._connections.values():
            connection.close()
        self._connections.clear()

    # --- connections and versions -------------------------------------------------------------------------------

    def connection(self, node_id: int | None = None) -> BrokerConnection:
        """An open connection to node `node_id` (None: any broker). Raises KafkaConnectionError when no broker
        can be reached (the message names every address tried)."""
        if node_id is None:
            return self._any_connection()
        connection = self._connections.get(node_id)
        if connection is not None and connection.connected and not connection.expired:
            return connection
        if connection is not None:
            connection.close()          # its session ran out (KIP-368): a new connection authenticates afresh
        broker = self._broker(node_id)
        for known_id, known in list(self._connections.items()):
            if known_id < 0 and known.connected and (known.host, known.port) == (broker.host, broker.port):
                del self._connections[known_id]     # the bootstrap connection reached this very node: adopt it
                known.node_id = node_id
                self._connections[node_id] = known
                return self.connection(node_id)
        connection = BrokerConnection(broker.host, broker.port, self.config, node_id)
        self._connections[node_id] = connection
        return connection.open()

    def _any_connection(self) -> BrokerConnection:
        for connection in self._connections.values():
            if connection.connected and not connection.expired:
                return connection
            connection.close()
        deadline = time.monotonic() + self.config.request_timeout_s
        backoff = RETRY_BACKOFF_S
        while True:
            connection, failures = self._try_addresses()
            if connection is not None:
                return connection
            unreachable = all(failure.unreachable for failure in failures)
            if not unreachable or time.monotonic() + backoff > deadline:
                break
            if not self._waited:
                self._waited = True
                self.on_waiting(f"waiting for {self.config.bootstrap}: {_reason(failures[0])}")
            time.sleep(backoff)         # a broker still starting: retry as Kafka's clients reconnect
            backoff = min(backoff * 2, RECONNECT_BACKOFF_MAX_S)
        if len(failures) == 1:
            raise failures[0]
        raise KafkaConnectionError("cannot reach any broker: " + "; ".join(f.message for f in failures),
                                   unreachable=unreachable)

    def _try_addresses(self):
        failures = []
        addresses = [(-1 - index, host, port) for index, (host, port) in enumerate(self.config.bootstrap_servers)]
        addresses += [(b.node_id, b.host, b.port) for b in self._brokers.values()]
        for node_id, host, port in addresses:
            connection = BrokerConnection(host, port, self.config, node_id)
            try:
                connection.open()
            except KafkaConnectionError as exc:
                failures.append(exc)
                continue
            self._connections[node_id] = connection
            return connection, failures
        return None, failures

    def _broker(self, node_id: int) -> BrokerMetadata:
        if node_id not in self._brokers:
            self.metadata([])
        broker = self._brokers.get(node_id)
        if broker is None:
            known = ", ".join(map(str, sorted(self._brokers))) or "none"
            raise KafkaError(ErrorCode.BROKER_NOT_AVAILABLE, f"node {node_id} is not among the cluster's brokers "
                                                             f"({known})")
        return broker

    def version_for(self, api_key: int, node_id: int | None = None, *, min_version: int = 0,
                    max_version: int | None = None) -> int:
        """The version of `api_key` requests to node `node_id` (None: any broker): the newest both sides accept.
        Raises KafkaError(UNSUPPORTED_VERSION) when the broker does not offer the API in that range."""
        return self.connection(node_id).version_for(api_key, min_version=min_version, max_version=max_version)

    def supports(self, api_key: int, node_id: int | None = None, *, min_version: int = 0) -> bool:
        """Whether the broker offers `api_key` at `min_version` or newer (and this codec can write it)."""
        try:
            self.version_for(api_key, node_id, min_version=min_version)
        except KafkaError as exc:
            if exc.code != ErrorCode.UNSUPPORTED_VERSION:
                raise
            return False
        return True

    def api_versions(self, node_id: int | None = None):
        """The ApiVersionsResponse the broker gave on connecting (api_keys, finalized_features, ...)."""
        return self.connection(node_id).api_versions_response

    # --- requests -----------------------------------------------------------------------------------------------

    def send(self, body, node_id: int | None = None, *, api_key: int | None = None, min_version: int = 0,
             max_version: int | None = None, timeout_s: float | None = None):
        """Sends a request and returns the response body. `body` is a request object, or a function of the
        negotiated version returning one (for requests whose fields depend on the version; `api_key` is then
        required). `min_version`/`max_version` bound the negotiation; `timeout_s` overrides request.timeout.ms."""
        return self.call(body, node_id, api_key=api_key, min_version=min_version, max_version=max_version,
                         timeout_s=timeout_s)[1]

    def call(self, body, node_id: int | None = None, *, api_key: int | None = None, min_version: int = 0,
             max_version: int | None = None, timeout_s: float | None = None):
        """As `send`, returning (version used, response body)."""
        if hasattr(body, "API_KEY"):
            api_key = body.API_KEY
        elif api_key is None:
            raise TypeError("send(build, ...) with a function of the version needs api_key=")
        for attempt in (1, 2):
            connection = self.connection(node_id)
            reused = connection.requests_done > 0
            version = connection.version_for(api_key, min_version=min_version, max_version=max_version)
            request = body if hasattr(body, "API_KEY") else body(version)
            try:
                return version, connection.request(request, version, timeout_s=timeout_s)
            except KafkaConnectionError:
                # an idle connection the broker closed fails on first use: try once more on a new one
                if attempt == 2 or not reused or api_key == PRODUCE:
                    raise
        raise AssertionError("unreachable")

    # --- cluster metadata ---------------------------------------------------------------------------------------

    def metadata(self, topics: list[str] | None = None, *, allow_auto_topic_creation: bool = False,
                 node_id: int | None = None) -> ClusterMetadata:
        """Metadata of `topics` (None: every topic; []: none, only brokers and the controller). Topics that do not
        exist come back with an error (UNKNOWN_TOPIC_OR_PARTITION), not raised. Refreshes the client's cache."""
        def build(version):
            if topics is None:
                wanted = [] if version == 0 else None
            elif not topics and version == 0:
                raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, "Metadata v0 cannot ask for no topics")
            else:
                wanted = [MetadataRequest.MetadataRequestTopic(name=name) for name in topics]
            return MetadataRequest(topics=wanted, allow_auto_topic_creation=version < 4 or allow_auto_topic_creation)
        version, response = self.call(build, node_id, api_key=METADATA, min_version=1 if topics == [] else 0)
        return self._learn(response, version, all_topics=topics is None)

    def _learn(self, response, version: int, *, all_topics: bool) -> ClusterMetadata:
        if response.error_code:
            raise KafkaError(response.error_code, "Metadata request refused")
        brokers = {b.node_id: BrokerMetadata(b.node_id, b.host, b.port, b.rack) for b in response.brokers}
        topics = {t.name: _topic_metadata(t, version) for t in response.topics}
        self._brokers = brokers
        self.cluster_id, self.controller_id = response.cluster_id, response.controller_id
        if all_topics:
            self._topics = {}
        self._topics.update(topics)
        for node_id, connection in list(self._connections.items()):
            known = brokers.get(node_id)
            if node_id >= 0 and (known is None or (known.host, known.port) != (connection.host, connection.port)):
                connection.close()          # the node left or moved
                del self._connections[node_id]
        return ClusterMetadata(response.cluster_id, response.controller_id, brokers, topics)

    @property
    def brokers(self) -> dict[int, BrokerMetadata]:
        """The brokers of the last Metadata answer (fetched now if there was none)."""
        if not self._brokers:
            self.metadata([])
        return dict(self._brokers)

    def leader(self, topic: str, partition: int, *, refresh: bool = False) -> int:
        """The node id leading `topic`/`partition`, from the cache or a Metadata refresh when it is missing, has no
        leader, or `refresh` is set (pass it after a NOT_LEADER_OR_FOLLOWER answer). Raises KafkaError
        (UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, TOPIC_AUTHORIZATION_FAILED, ...)."""
        known = self._topics.get(topic)
        state = known.partitions.get(partition) if known and not known.error else None
        if refresh or state is None or state.leader < 0:
            known = self.metadata([topic]).topics.get(topic)
            if known is None:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"the broker did not describe topic {topic}")
            if known.error:
                raise KafkaError(known.error.code, f"topic {topic}: {known.error.message}")
            state = known.partitions.get(partition)
        if state is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             f"topic {topic} has no partition {partition} (it has {len(known.partitions)})")
        if state.leader < 0:
            raise KafkaError(ErrorCode.LEADER_NOT_AVAILABLE, f"{topic}-{partition} has no leader right now")
        return state.leader

    def topic(self, topic: str, *, refresh: bool = False) -> TopicMetadata:
        """A topic's metadata (cached unless `refresh`); raises its error (UNKNOWN_TOPIC_OR_PARTITION, ...)."""
        known = None if refresh else self._topics.get(topic)
        if known is None or known.error:
            known = self.metadata([topic]).topics.get(topic) or TopicMetadata(
                topic, error=KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
        if known.error:
            raise KafkaError(known.error.code, f"topic {topic}: {known.error.message}")
        return known

    # --- coordinators -------------------------------------------------------------------------------------------

    def coordinator(self, key: str, key_type: int = GROUP, *, refresh: bool = False) -> int:
        """The node id coordinating a group (key_type 0: consumer, classic and share groups alike), a
        transactional id (1) or a share-state key (2, "group:topic id:partition"). Waits out
        COORDINATOR_NOT_AVAILABLE / LOAD_IN_PROGRESS up to request.timeout.ms; raises other errors."""
        result = self.coordinators([key], key_type, refresh=refresh)[key]
        if isinstance(result, KafkaError):
            raise result
        return result

    def coordinators(self, keys: list[str], key_type: int = GROUP, *, refresh: bool = False) -> dict:
        """{key: node id, or the KafkaError that key got}; one FindCoordinator v4+ request per round, one per key
        with older brokers. Retriable errors are retried until request.timeout.ms."""
        results: dict = {}
        pending = []
        for key in dict.fromkeys(keys):
            if not refresh and (key_type, key) in self._coordinators:
                results[key] = self._coordinators[(key_type, key)]
            else:
                pending.append(key)
        deadline = time.monotonic() + self.config.request_timeout_s
        while pending:
            found = self._find_coordinators(pending, key_type)
            results.update(found)
            pending = [k for k, v in found.items() if isinstance(v, KafkaError) and v.code in _COORDINATOR_RETRIABLE]
            if pending and time.monotonic() + RETRY_BACKOFF_S > deadline:
                break
            if pending:
                time.sleep(RETRY_BACKOFF_S)
        return results

    def _find_coordinators(self, keys: list[str], key_type: int) -> dict:
        connection = self.connection(None)
        min_version = 1 if key_type else 0
        version = connection.version_for(FIND_COORDINATOR, min_version=min_version)
        if version >= 4:
            response = self.send(FindCoordinatorRequest(key_type=key_type, coordinator_keys=list(keys)),
                                 min_version=4)
            answers = {c.key: c for c in response.coordinators}
        else:
            answers = {}
            for key in keys:
                answers[key] = self.send(lambda v, key=key: FindCoordinatorRequest(key=key, key_type=key_type)
                                         if v else FindCoordinatorRequest(key=key), api_key=FIND_COORDINATOR,
                                         min_version=min_version, max_version=3)
        found = {}
        for key in keys:
            answer = answers.get(key)
            if answer is None:
                found[key] = KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"no coordinator given for {key!r}")
            elif answer.error_code:
                found[key] = KafkaError(answer.error_code, answer.error_message or None)
            else:
                self._brokers.setdefault(answer.node_id, BrokerMetadata(answer.node_id, answer.host, answer.port))
                self._coordinators[(key_type, key)] = found[key] = answer.node_id
        return found

    def forget_coordinator(self, key: str, key_type: int = GROUP) -> None:
        """Drops a cached coordinator (after NOT_COORDINATOR), so that the next lookup asks again."""
        self._coordinators.pop((key_type, key), None)


def _log_waiting(message: str) -> None:
    log.warning("%s", message)


def _reason(failure: KafkaConnectionError) -> str:
    # "cannot connect to h:p (bootstrap): Connection refused (is a ...)" -> "connection refused"
    reason = failure.message.split(": ", 1)[-1].split(" (", 1)[0]
    return reason[:1].lower() + reason[1:]


def _topic_metadata(topic, version: int) -> TopicMetadata:
    partitions = {p.partition_index: PartitionMetadata(p.partition_index, p.leader_id, p.leader_epoch,
                                                       list(p.replica_nodes), list(p.isr_nodes),
                                                       list(p.offline_replicas), error_or_none(p.error_code))
                  for p in topic.partitions}
    topic_id = str(topic.topic_id) if version >= 10 else None
    return TopicMetadata(topic.name, topic_id, topic.is_internal, partitions, error_or_none(topic.error_code))

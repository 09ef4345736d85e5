"""The Prometheus families of a running broker, built at scrape time (on the broker's event loop) from what each
node counts (`counting.BrokerMetrics`) and from its state (logs, groups, committed offsets).

Names follow what Prometheus's jmx_exporter makes of Kafka's MBeans with its usual Kafka rules
(`lowercaseOutputName`; `...PerSec` meters become `_total` counters), so that dashboards built for Kafka read them;
consumer lag is named as kafka_exporter names it. Every metric, per node:

    kafka_server_brokertopicmetrics_messagesin_total{topic}            records appended (BrokerTopicMetrics
                                                                       MessagesInPerSec; a batch header's count)
    kafka_server_brokertopicmetrics_bytesin_total{topic}               produced record bytes (BytesInPerSec)
    kafka_server_brokertopicmetrics_bytesout_total{topic}              record bytes sent to consumers (BytesOutPerSec)
    kafka_server_brokertopicmetrics_totalproducerequests_total{topic}  partitions of Produce requests
    kafka_server_brokertopicmetrics_failedproducerequests_total{topic} of those, failed unexpectedly (as Kafka
                                                                       counts: record validation, producer state)
    kafka_server_brokertopicmetrics_totalfetchrequests_total{topic}    partitions of consumers' Fetch requests
    kafka_server_brokertopicmetrics_failedfetchrequests_total{topic}   of those, failed unexpectedly
    kafka_network_requestmetrics_requests_total{request,version}       requests answered (RequestsPerSec; Produce
                                                                       acks=0 too), by Kafka's API name
    kafka_network_requestmetrics_errors_total{request,error}           error codes in responses (ErrorsPerSec):
                                                                       every occurrence, NONE included, as Kafka
    kafka_network_requestmetrics_totaltimems{request,version}          histogram (ms) of the time from a request
                                                                       read to its response encoded (TotalTimeMs)
    kafka_server_socket_server_metrics_connection_count{listener}      open connections (socket-server-metrics)
    kafka_server_socket_server_metrics_connection_creation_total{listener}
    kafka_server_socket_server_metrics_connection_close_total{listener}
    kafka_server_socket_server_metrics_incoming_byte_total{listener}   request bytes read (size prefixes included)
    kafka_server_socket_server_metrics_outgoing_byte_total{listener}   response bytes written
    kafka_server_delayedoperationpurgatory_purgatorysize{delayedOperation="Produce"|"Fetch"}
                                                                       requests waiting: acks=all for their ISR,
                                                                       Fetch long polls (one per request)
    kafka_log_log_size{topic,partition}                                bytes of the partition's segments (Log Size)
    kafka_log_log_numlogsegments{topic,partition}
    kafka_log_log_logstartoffset{topic,partition}
    kafka_log_log_logendoffset{topic,partition}
    kafka_coordinator_group_groupmetadatamanager_numgroups             classic groups (GroupMetadataManager)
    kafka_coordinator_group_groupmetadatamanager_numgroups{stable,preparingrebalance,completingrebalance,empty,dead}
                                                                       classic groups in that state (one gauge each,
                                                                       e.g. ..._numgroupsstable)
    kafka_coordinator_group_groupmetadatamanager_numoffsets            committed offsets held
    kafka_server_group_coordinator_metrics_group_count{protocol}       groups by type: classic, consumer, share
    kafka_server_group_coordinator_metrics_consumer_group_count{state} KIP-848 consumer groups by state
    kafka_server_group_coordinator_metrics_share_group_count{state}    share groups by state (Kafka reports them as
                                                                       group-count{protocol="share",state})

and for the cluster (lag is the same whichever node is asked):

    kafka_consumergroup_current_offset{consumergroup,topic,partition}  committed offset (classic and consumer groups)
    kafka_consumergroup_lag{consumergroup,topic,partition}             end offset - committed offset; the end offset
                                                                       is the one consumers see (the high watermark
                                                                       of the partition's leader, ListOffsets'
                                                                       latest), the log end offset on a single node
    kafka_consumergroup_lag_sum{consumergroup,topic}
    kafka_consumergroup_members{consumergroup}

The exporter adds prometheus_client's process metrics (`process_open_fds`, `process_resident_memory_bytes`,
`process_cpu_seconds_total`, ...) and the client metrics pushed by clients (KIP-714), from
`compatbroker.telemetry.export.metric_families(runtime)` when that module is there.

Nodes: a runtime of several nodes (`serve --nodes N`, one process, one endpoint) adds a `node` label (the node id)
to every per-node family above, so each node's series stay apart; a single broker's families have none, exactly as
one Kafka broker's exporter shows them. Requests, connections and topic counters are counted by the node whose
listener served them; log gauges are per replica (each node's copy of a partition).
"""
from __future__ import annotations

import logging
from collections.abc import Iterable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.utils import floatToGoString

from ..protocol import api_name
from ..protocol.error_codes import ErrorCode
from .counting import LATENCY_BOUNDS_S

log = logging.getLogger(__name__)

_LE_MS = [floatToGoString(bound * 1000) for bound in LATENCY_BOUNDS_S] + ["+Inf"]
_CLASSIC_STATES = (("Stable", "stable"), ("PreparingRebalance", "preparingrebalance"),
                   ("CompletingRebalance", "completingrebalance"), ("Empty", "empty"), ("Dead", "dead"))
_TOPIC_COUNTERS = (  # (name after kafka_server_brokertopicmetrics_, TopicStats field, help)
    ("messagesin", "messages_in", "Records appended to the topic's partitions on this node"),
    ("bytesin", "bytes_in", "Record bytes produced to the topic on this node"),
    ("bytesout", "bytes_out", "Record bytes sent to consumers of the topic from this node"),
    ("totalproducerequests", "produce_requests", "Partitions of Produce requests for the topic"),
    ("failedproducerequests", "failed_produce_requests", "Partitions of Produce requests that failed unexpectedly"),
    ("totalfetchrequests", "fetch_requests", "Partitions of consumers' Fetch requests for the topic"),
    ("failedfetchrequests", "failed_fetch_requests", "Partitions of consumers' Fetch requests that failed"),
)
_LOG_GAUGES = (
    ("size", "Bytes of the partition's log segments on this node"),
    ("numlogsegments", "Segments of the partition's log"),
    ("logstartoffset", "First offset of the partition's log"),
    ("logendoffset", "Offset after the last record of the partition's log"),
)


class BrokerCollector:
    """A prometheus_client collector of a runtime (`compatbroker.server.run.ClusterRuntime`, read duck-typed: its
    `cluster.nodes`, each a `Broker`). Call `collect()` on the broker's event loop only."""

    def __init__(self, runtime):
        self._runtime = runtime

    def collect(self) -> Iterable:
        cluster = getattr(self._runtime, "cluster", None)
        nodes = dict(cluster.nodes) if cluster is not None else {}
        labels = _NodeLabels(len(nodes) > 1)
        yield from _topic_families(nodes, labels)
        yield from _request_families(nodes, labels)
        yield from _socket_families(nodes, labels)
        yield _purgatory_family(nodes, labels)
        yield from _log_families(nodes, labels)
        yield from _group_families(nodes, labels)
        yield from _lag_families(nodes)
        yield from _telemetry_families(self._runtime)


class _NodeLabels:
    """The label names and values of a per-node family: with `node` first in a runtime of several nodes."""

    def __init__(self, multi_node: bool):
        self.multi_node = multi_node

    def names(self, *names: str) -> list[str]:
        return ["node", *names] if self.multi_node else list(names)

    def values(self, node_id: int, *values) -> list[str]:
        values = [str(value) for value in values]
        return [str(node_id), *values] if self.multi_node else values


def _topic_families(nodes, labels: _NodeLabels):
    for node in nodes.values():
        node.metrics.prune_topics()  # deleted topics' series go, as Kafka removes their meters
    for suffix, field, documentation in _TOPIC_COUNTERS:
        family = CounterMetricFamily(f"kafka_server_brokertopicmetrics_{suffix}", documentation,
                                     labels=labels.names("topic"))
        for node_id, node in nodes.items():
            for topic, stats in sorted(node.metrics.topics.items()):
                family.add_metric(labels.values(node_id, topic), getattr(stats, field))
        yield family


def _request_families(nodes, labels: _NodeLabels):
    requests = CounterMetricFamily("kafka_network_requestmetrics_requests", "Requests answered, by API and version",
                                   labels=labels.names("request", "version"))
    errors = CounterMetricFamily("kafka_network_requestmetrics_errors",
                                 "Error codes in responses (every occurrence, NONE included), by API",
                                 labels=labels.names("request", "error"))
    latency = HistogramMetricFamily("kafka_network_requestmetrics_totaltimems",
                                    "Milliseconds from a request read to its response encoded",
                                    labels=labels.names("request", "version"))
    for node_id, node in nodes.items():
        by_api_error: dict[tuple[str, str], int] = {}  # codes Kafka does not know all become UNKNOWN_SERVER_ERROR
        for stats in sorted(node.metrics.requests.values(), key=lambda item: (item.api_key, item.version)):
            name = api_name(stats.api_key)
            requests.add_metric(labels.values(node_id, name, stats.version), stats.count)
            cumulative, buckets = 0, []
            for le, count in zip(_LE_MS, stats.buckets):
                cumulative += count
                buckets.append((le, cumulative))
            latency.add_metric(labels.values(node_id, name, stats.version), buckets, stats.latency_sum_s * 1000)
            for code, count in stats.errors.items():
                key = (name, _error_name(code))
                by_api_error[key] = by_api_error.get(key, 0) + count
        for (name, error), count in sorted(by_api_error.items()):
            errors.add_metric(labels.values(node_id, name, error), count)
    yield from (requests, errors, latency)


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR.name


def _socket_families(nodes, labels: _NodeLabels):
    prefix = "kafka_server_socket_server_metrics_"
    names = labels.names("listener")
    count = GaugeMetricFamily(prefix + "connection_count", "Open client connections", labels=names)
    created = CounterMetricFamily(prefix + "connection_creation", "Client connections accepted", labels=names)
    closed = CounterMetricFamily(prefix + "connection_close", "Client connections closed", labels=names)
    incoming = CounterMetricFamily(prefix + "incoming_byte", "Request bytes read", labels=names)
    outgoing = CounterMetricFamily(prefix + "outgoing_byte", "Response bytes written", labels=names)
    for node_id, node in nodes.items():
        for listener, stats in sorted(node.metrics.listeners.items()):
            values = labels.values(node_id, listener)
            count.add_metric(values, stats.connections)
            created.add_metric(values, stats.connections_opened)
            closed.add_metric(values, stats.connections_closed)
            incoming.add_metric(values, stats.bytes_in)
            outgoing.add_metric(values, stats.bytes_out)
    yield from (count, created, closed, incoming, outgoing)


def _purgatory_family(nodes, labels: _NodeLabels):
    family = GaugeMetricFamily("kafka_server_delayedoperationpurgatory_purgatorysize",
                               "Requests waiting: Produce (acks=all, for the ISR), Fetch (long polls)",
                               labels=labels.names("delayedOperation"))
    for node_id, node in nodes.items():
        family.add_metric(labels.values(node_id, "Produce"), node.metrics.produce_waiting)
        family.add_metric(labels.values(node_id, "Fetch"), node.metrics.fetch_waiting)
    return family


def _log_families(nodes, labels: _NodeLabels):
    families = {name: GaugeMetricFamily(f"kafka_log_log_{name}", documentation,
                                        labels=labels.names("topic", "partition"))
                for name, documentation in _LOG_GAUGES}
    for node_id, node in nodes.items():
        for (topic, partition), partition_log in sorted(node.logs.logs.items()):
            values = labels.values(node_id, topic, partition)
            segments = partition_log.segments
            families["size"].add_metric(values, sum(segment.size for segment in segments))
            families["numlogsegments"].add_metric(values, len(segments))
            families["logstartoffset"].add_metric(values, partition_log.log_start_offset)
            families["logendoffset"].add_metric(values, partition_log.log_end_offset)
    yield from families.values()


def _group_families(nodes, labels: _NodeLabels):
    prefix = "kafka_coordinator_group_groupmetadatamanager_"
    classic_total = GaugeMetricFamily(prefix + "numgroups", "Classic groups", labels=labels.names())
    classic_states = {state: GaugeMetricFamily(prefix + "numgroups" + suffix, f"Classic groups in state {state}",
                                               labels=labels.names())
                      for state, suffix in _CLASSIC_STATES}
    offsets = GaugeMetricFamily(prefix + "numoffsets", "Committed offsets held", labels=labels.names())
    by_type = GaugeMetricFamily("kafka_server_group_coordinator_metrics_group_count", "Groups by type",
                                labels=labels.names("protocol"))
    consumer = GaugeMetricFamily("kafka_server_group_coordinator_metrics_consumer_group_count",
                                 "Consumer groups (KIP-848) by state", labels=labels.names("state"))
    share = GaugeMetricFamily("kafka_server_group_coordinator_metrics_share_group_count",
                              "Share groups (KIP-932) by state", labels=labels.names("state"))
    for node_id, node in nodes.items():
        groups = node.coordinator.all_groups() if node.coordinator is not None else []
        counts: dict[tuple[str, str], int] = {}
        for group in groups:
            key = (group.group_type, str(group.state))
            counts[key] = counts.get(key, 0) + 1
        classic_total.add_metric(labels.values(node_id), _sum(counts, "classic"))
        for state, family in classic_states.items():
            family.add_metric(labels.values(node_id), counts.get(("classic", state), 0))
        offsets.add_metric(labels.values(node_id), _offsets_held(node))
        for kind in ("classic", "consumer", "share"):
            by_type.add_metric(labels.values(node_id, kind), _sum(counts, kind))
        for (kind, state), count in sorted(counts.items()):
            if kind == "consumer":
                consumer.add_metric(labels.values(node_id, state), count)
            elif kind == "share":
                share.add_metric(labels.values(node_id, state), count)
    yield from (classic_total, *classic_states.values(), offsets, by_type, consumer, share)


def _sum(counts: dict[tuple[str, str], int], kind: str) -> int:
    return sum(count for (group_type, _), count in counts.items() if group_type == kind)


def _offsets_held(node) -> int:
    store = node.coordinator.offsets if node.coordinator is not None else None
    if store is None:
        return 0
    return sum(len(store.fetch(group_id)) for group_id in store.groups_with_offsets())


def _lag_families(nodes):
    current = GaugeMetricFamily("kafka_consumergroup_current_offset", "Committed offset of a consumer group",
                                labels=["consumergroup", "topic", "partition"])
    lag = GaugeMetricFamily("kafka_consumergroup_lag", "End offset (high watermark) minus committed offset",
                            labels=["consumergroup", "topic", "partition"])
    lag_sum = GaugeMetricFamily("kafka_consumergroup_lag_sum", "Lag of a consumer group over a topic's partitions",
                                labels=["consumergroup", "topic"])
    members = GaugeMetricFamily("kafka_consumergroup_members", "Members of a consumer group",
                                labels=["consumergroup"])
    for node in nodes.values():
        coordinator = node.coordinator
        if coordinator is None:
            continue
        for group in coordinator.all_groups():
            if group.group_type == "share":
                continue
            members.add_metric([group.group_id], len(group.members))
            sums: dict[str, int] = {}
            for (topic, partition), committed in sorted(coordinator.offsets.fetch(group.group_id).items()):
                end = _end_offset(node, topic, partition)
                if end is None or committed.offset < 0:
                    continue
                values = [group.group_id, topic, str(partition)]
                current.add_metric(values, committed.offset)
                lag.add_metric(values, end - committed.offset)
                sums[topic] = sums.get(topic, 0) + end - committed.offset
            for topic, total in sorted(sums.items()):
                lag_sum.add_metric([group.group_id, topic], total)
    yield from (current, lag, lag_sum, members)


def _end_offset(node, topic: str, partition: int) -> int | None:
    """The end offset consumers see: the high watermark of the partition's leader; None when it has none."""
    state = node.partition_state(topic, partition)
    if state is None:
        return None
    leader = node.cluster.nodes.get(state.leader)
    partition_log = leader.get_log(topic, partition) if leader is not None else None
    return partition_log.high_watermark if partition_log is not None else None


def _telemetry_families(runtime):
    """The client metrics pushed through KIP-714 (compatbroker.telemetry, when present)."""
    try:
        from ..telemetry.export import metric_families
    except ImportError:
        return
    try:
        yield from metric_families(runtime)
    except Exception:  # noqa: BLE001 - the broker's own metrics must still be served
        log.exception("client telemetry metrics could not be exported")

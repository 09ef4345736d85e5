"""Every client, tool and application of the compatibility matrix, with its family and what it takes part in.

One entry per matrix row. `joins` names the shared, parametrized tests a client runs in (the adapter interface of
base.py that they need); tests written for one client alone live in a module of its own (test_sarama.py,
test_kafka_go.py...), each test marked with its flow. Test modules ask `with_tag(...)` for their parameters instead of
listing names, so that a new client joins the shared flows by its entry alone.

Tags:
- "client": the `client` fixture: produce, consume and list offsets with every record shape, acks, codec and starting
  point, restart, recompression (the whole ClientAdapter produce/consume/list_offsets surface).
- "each": the `each_client` fixture: metadata, listing topics, committed offsets (metadata, list_topics,
  group_consume, committed).
- "member": group members in processes of their own (member_command: the protocol of member.py).
- "member_commit": members that commit on command (resume from committed offsets after a broker restart).
- "static": static membership (group.instance.id). "cooperative": the cooperative-sticky assignor.
- "group_admin": list_groups, describe_groups and group_offsets.
- "idempotent": produce_idempotent under injected faults. "transactional": run_transactional and read_to_end.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping

# Families, in the order the matrix shows them.
PYTHON, LIBRDKAFKA_C, GO, NODE, JVM, APPLICATIONS = (
    "Python", "C (librdkafka)", "Go", "Node.js", "JVM", "Applications and pipelines")
FAMILIES = (PYTHON, LIBRDKAFKA_C, GO, NODE, JVM, APPLICATIONS)

@dataclasses.dataclass(frozen=True)
class ClientInfo:
    name: str  # the matrix row, and the parameter value of the shared tests
    family: str
    joins: frozenset[str] = frozenset()  # tags: the shared tests it runs in (module docstring)
    # flow -> why the client cannot do that flow at all (the cell says "n/a: <reason>"); verified, not assumed.
    not_applicable: Mapping[str, str] = dataclasses.field(default_factory=dict)
    # "module:function" in this package: function(name) returns the ClientAdapter, raising MissingClient with the
    # install command; empty for the clients that load() in __init__.py knows, and for applications without one.
    adapter: str = ""
    # "module:function" in this package: function(name) returns the installed version as text, or None.
    version: str = ""


def _tags(*tags: str) -> frozenset[str]:
    return frozenset(tags)


CLIENTS: tuple[ClientInfo, ...] = (
    # --- Python ---
    ClientInfo("kafka-python", PYTHON, _tags("client", "each", "member", "member_commit", "static", "cooperative",
                                             "group_admin", "transactional")),
    ClientInfo("kafka-python-2.2", PYTHON, _tags("client", "each", "member", "member_commit", "transactional"),
               not_applicable={"groups_consumer_protocol": "kafka-python 2.2 has no group.protocol=consumer",
                               "share_groups": "kafka-python 2.2 has no share consumer",
                               "telemetry": "kafka-python 2.2 does not push client metrics (no KIP-714)"},
               adapter="older_python:load", version="older_python:version"),
    ClientInfo("aiokafka", PYTHON, _tags("client", "each", "member", "member_commit", "static", "idempotent",
                                         "transactional")),
    ClientInfo("aiokafka-0.10", PYTHON, _tags("client", "each", "member", "member_commit", "static", "idempotent",
                                              "transactional"),
               not_applicable={"groups_consumer_protocol": "aiokafka 0.10 has no group.protocol=consumer",
                               "share_groups": "aiokafka 0.10 has no share consumer",
                               "telemetry": "aiokafka 0.10 does not push client metrics (no KIP-714)"},
               adapter="older_python:load", version="older_python:version"),
    ClientInfo("confluent-kafka", PYTHON, _tags("client", "each", "member", "member_commit", "static", "cooperative",
                                                "group_admin", "transactional")),
    ClientInfo("confluent-kafka-2.4", PYTHON, _tags("client", "each", "member", "member_commit", "static",
                                                    "cooperative", "group_admin", "transactional"),
               not_applicable={"share_groups": "confluent-kafka 2.4's librdkafka 2.4 has no share consumer",
                               "telemetry": "confluent-kafka 2.4's librdkafka 2.4 predates KIP-714 (librdkafka 2.5)"},
               adapter="older_python:load", version="older_python:version"),
    # --- C ---
    ClientInfo("kcat", LIBRDKAFKA_C, _tags("client", "each", "member", "idempotent")),
    # --- Go ---
    ClientInfo("sarama", GO, _tags("each", "idempotent")),
    ClientInfo("sarama-2.1", GO, _tags("each", "member", "idempotent"), adapter="sarama_client:load",
               version="sarama_client:installed_version", not_applicable={
                   **{flow: "sarama 1.22 has no transactional producer" for flow in ("transactions", "exactly_once")},
                   "cluster admin": "sarama 1.22's ClusterAdmin has no election, reassignment, quorum or log dir calls",
                   "fetch from follower": "sarama 1.22 predates KIP-392 (no RackID)",
                   "groups_consumer_protocol": "sarama 1.22 has no ConsumerGroupHeartbeat (classic only)",
                   "share_groups": "sarama 1.22 has no share consumer",
                   "telemetry": "sarama 1.22 does not push client metrics (no KIP-714)"}),
    ClientInfo("kafka-go", GO, adapter="kafka_go_client:load", version="kafka_go_client:installed_version",
               not_applicable={
                   "metadata_all_topics": "kafka-go 0.2.1 cannot ask for every topic (ReadPartitions() without topics "
                                          "sends an empty list, which Kafka answers with none)",
                   "idempotence": "kafka-go 0.2.1 has no idempotent producer (no InitProducerId)",
                   **{flow: "kafka-go 0.2.1 has no transactional producer"
                      for flow in ("transactions", "exactly_once")},
                   "admin_configs": "kafka-go 0.2.1 has no DescribeConfigs or AlterConfigs",
                   "sasl": "kafka-go 0.2.1 has no SASL (its Dialer offers TLS only)",
                   "cluster admin": "kafka-go 0.2.1's Conn has no election, reassignment, quorum or log dir calls",
                   "fetch from follower": "kafka-go 0.2.1 sends Fetch v2 (no rack, KIP-392 needs v11)",
                   "groups_consumer_protocol": "kafka-go 0.2.1 has no ConsumerGroupHeartbeat (classic only)",
                   "share_groups": "kafka-go 0.2.1 has no share consumer",
                   "telemetry": "kafka-go 0.2.1 does not push client metrics (no KIP-714)"}),
    ClientInfo("confluent-kafka-go", GO, _tags("client", "each", "member", "member_commit", "static", "idempotent"),
               not_applicable={
                   **{flow: "confluent-kafka-go 0.11.6 (Debian's) has no transactional producer API: no "
                            "InitTransactions, BeginTransaction or CommitTransaction"
                      for flow in ("transactions", "exactly_once")},
                   # the librdkafka it runs on (Debian's 2.0.2), as kcat's
                   "groups_consumer_protocol":
                       "confluent-kafka-go's librdkafka 2.0.2 predates KIP-848 (librdkafka 2.4)",
                   "share_groups": "confluent-kafka-go's librdkafka 2.0.2 has no share consumer (librdkafka 2.15)",
                   "telemetry": "confluent-kafka-go's librdkafka 2.0.2 predates KIP-714 (librdkafka 2.5)"},
               adapter="confluent_kafka_go_client:load", version="confluent_kafka_go_client:installed_version"),
    # --- Node.js ---
    ClientInfo("kafkajs", NODE, _tags("client", "each", "member", "member_commit", "idempotent", "transactional")),
    ClientInfo("confluent-kafka-javascript", NODE, _tags("client", "each", "member", "member_commit", "static",
                                                         "cooperative", "idempotent", "transactional"),
               not_applicable={"admin_configs": "@confluentinc/kafka-javascript 1.10.1 has no describeConfigs or "
                                                "alterConfigs (neither its KafkaJS API nor its node-rdkafka API)"},
               adapter="rdkafka_js_client:load", version="rdkafka_js_client:version"),
    ClientInfo("node-rdkafka", NODE, _tags("client", "each", "member", "member_commit", "static", "cooperative",
                                              "idempotent", "transactional"),
               not_applicable={"admin_configs": "node-rdkafka 3.6.1's AdminClient has only createTopic, deleteTopic "
                                                "and createPartitions"},
               adapter="rdkafka_js_client:load", version="rdkafka_js_client:version"),
    ClientInfo("platformatic-kafka", NODE, _tags("each", "member_commit", "idempotent"),
               not_applicable={"share_groups": "@platformatic/kafka 1.35.0 has no share consumer",
                               "telemetry": "@platformatic/kafka 1.35.0 does not push client metrics (no KIP-714)"},
               adapter="platformatic_client:load", version="platformatic_client:installed_version"),
    # --- JVM: the Java client through Spark is the matrix's "java (Spark)" row (matrix.JAVA) ---
    ClientInfo("kafka-tools", JVM, version="kafka_tools_version:version"),  # test_kafka_tools.py
    # --- applications and pipelines ---
    ClientInfo("faust", APPLICATIONS, version="app_versions:version"),
    ClientInfo("rsyslog", APPLICATIONS, version="app_versions:version", not_applicable={
        # omkafka.so and imkafka.so (rsyslog-kafka 8.2302) call no librdkafka admin, metadata listing or transaction API
        "metadata": "rsyslog 8.2302 lists no metadata (omkafka reads partition counts internally)",
        "admin_topics": "rsyslog 8.2302's omkafka and imkafka have no admin calls",
        "admin_configs": "rsyslog 8.2302's omkafka and imkafka have no admin calls",
        "transactions": "rsyslog 8.2302's omkafka has no transactional producer",
    }),
    ClientInfo("syslog-ng", APPLICATIONS, version="app_versions:version", not_applicable={
        # libkafka.so of syslog-ng 3.38 (Debian's syslog-ng-mod-rdkafka): a destination driver only
        **{flow: "syslog-ng 3.38's kafka-c() is a destination only (no Kafka source)"
           for flow in ("consume", "groups", "committed_offsets")},
        "metadata": "syslog-ng 3.38 lists no metadata (kafka-c() only produces)",
        "admin_topics": "syslog-ng 3.38's kafka-c() has no admin calls",
        "admin_configs": "syslog-ng 3.38's kafka-c() has no admin calls",
    }),
)


def names() -> tuple[str, ...]:
    return tuple(info.name for info in CLIENTS)


def with_tag(tag: str) -> tuple[str, ...]:
    """The clients taking part in the shared tests of `tag`, in the matrix's order."""
    return tuple(info.name for info in CLIENTS if tag in info.joins)


def info(name: str) -> ClientInfo:
    for found in CLIENTS:
        if found.name == name:
            return found
    raise KeyError(name)

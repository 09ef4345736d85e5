"""confluent-kafka-go 0.11.6 (Debian's package, on librdkafka 2.0.2): the flows only it runs here, its AdminClient,
TLS and SASL.

0.11.6's admin API is CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs and AlterConfigs (the non
incremental one, which replaces a resource's whole set of dynamic configs). TLS and SASL are librdkafka's own
settings, passed through the binding's ConfigMap: produce and consume over an SSL listener, an mTLS one, and with
SASL PLAIN, SCRAM-SHA-512 (over SASL_SSL) and OAUTHBEARER (librdkafka's unsecured token); refusals arrive as error
events, named as librdkafka names them (_SSL or _TRANSPORT with OpenSSL's words, _AUTHENTICATION with Kafka's
message). Its produce, consume, list offsets, metadata, group, committed offsets, idempotence and restart flows run
in the shared tests (catalog tags "client", "each", "member", "member_commit", "static", "idempotent").
"""
from __future__ import annotations

import pytest

from compatbroker.toolkit.security import SecuritySetup

from . import clients
from .records import Record, assert_same, numbered
from .secured_clients import secured_broker, stored_values
from .test_sasl import WRONG_PASSWORD

pytestmark = pytest.mark.matrix(client="confluent-kafka-go")

NONE, UNKNOWN_TOPIC_OR_PARTITION, TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS, INVALID_CONFIG = 0, 3, 36, 37, 40


@pytest.fixture(scope="module")
def ckgo():
    return clients.load_or_fail("confluent-kafka-go")


def results(answers: list[dict]) -> list:
    """The results of admin calls that must not fail as a whole."""
    failed = [answer["error"] for answer in answers if "error" in answer]
    assert not failed, f"confluent-kafka-go admin calls failed: {failed}"
    return [answer["result"] for answer in answers]


def codes(outcomes: dict) -> dict[str, int]:
    return {name: found["code"] for name, found in outcomes.items()}


@pytest.mark.matrix(flow="admin_topics")
def test_create_grow_and_delete_topics(ckgo, broker, reference, topic):
    bootstrap = broker.bootstrap
    three, checked = f"{topic}.three", f"{topic}.validated"
    created, again, validated = results(ckgo.admin(
        bootstrap,
        {"call": "create_topics", "topics": [{"name": three, "partitions": 3, "replication": 1,
                                              "configs": {"cleanup.policy": "compact"}}]},
        {"call": "create_topics", "topics": [{"name": three, "partitions": 1, "replication": 1}]},
        {"call": "create_topics", "topics": [{"name": checked, "partitions": 2, "replication": 1}],
         "validate_only": True}))
    assert codes(created) == {three: NONE}
    assert codes(again) == {three: TOPIC_ALREADY_EXISTS}
    assert codes(validated) == {checked: NONE}
    view = ckgo.metadata(bootstrap, [three, checked])
    assert set(view.topics) == {three}, "validate_only created the topic"
    assert set(view.topics[three]) == {0, 1, 2}

    grown, shrunk, dry = results(ckgo.admin(
        bootstrap,
        {"call": "create_partitions", "topic": three, "increase_to": 5},
        {"call": "create_partitions", "topic": three, "increase_to": 2},
        {"call": "create_partitions", "topic": three, "increase_to": 8, "validate_only": True}))
    assert (codes(grown), codes(shrunk), codes(dry)) == ({three: NONE}, {three: INVALID_PARTITIONS}, {three: NONE})
    assert reference.partitions_for(bootstrap, three) == set(range(5))
    reference.produce(bootstrap, three, [Record(b"k", b"into partition 4", partition=4)])

    deleted, unknown = results(ckgo.admin(bootstrap, {"call": "delete_topics", "names": [three]},
                                          {"call": "delete_topics", "names": [f"{topic}.never"]}))
    assert codes(deleted) == {three: NONE}
    assert codes(unknown) == {f"{topic}.never": UNKNOWN_TOPIC_OR_PARTITION}
    assert three not in ckgo.list_topics(bootstrap)


@pytest.mark.matrix(flow="admin_configs")
def test_describe_and_alter_topic_and_broker_configs(ckgo, broker, reference, topic):
    bootstrap = broker.bootstrap
    results(ckgo.admin(bootstrap, {"call": "create_topics", "topics": [
        {"name": topic, "partitions": 1, "replication": 1,
         "configs": {"retention.ms": "3600000", "max.message.bytes": "100000"}}]}))
    [before] = results(ckgo.admin(bootstrap, {"call": "describe_configs", "resource_type": "topic", "name": topic}))
    assert before["code"] == NONE
    assert before["configs"]["retention.ms"]["value"] == "3600000"
    assert before["configs"]["retention.ms"]["source"] == "DYNAMIC_TOPIC_CONFIG"
    assert before["configs"]["cleanup.policy"]["source"] in {"DEFAULT_CONFIG", "STATIC_BROKER_CONFIG"}

    # AlterConfigs replaces the topic's dynamic configs: max.message.bytes, left out, goes back to its default.
    altered, refused, dry = results(ckgo.admin(
        bootstrap,
        {"call": "alter_configs", "resource_type": "topic", "name": topic, "configs": {"retention.ms": "7200000"}},
        {"call": "alter_configs", "resource_type": "topic", "name": topic, "configs": {"retention.ms": "soon"}},
        {"call": "alter_configs", "resource_type": "topic", "name": topic, "configs": {"retention.ms": "1"},
         "validate_only": True}))
    assert altered["code"] == NONE and dry["code"] == NONE
    assert refused["code"] == INVALID_CONFIG, refused
    [after] = results(ckgo.admin(bootstrap, {"call": "describe_configs", "resource_type": "topic", "name": topic}))
    assert after["configs"]["retention.ms"]["value"] == "7200000"
    assert after["configs"]["max.message.bytes"]["source"] != "DYNAMIC_TOPIC_CONFIG", after["configs"]

    [node] = {node for node, _host, _port in ckgo.metadata(bootstrap).brokers}
    [described] = results(ckgo.admin(bootstrap, {"call": "describe_configs", "resource_type": "broker",
                                                 "name": str(node)}))
    assert described["code"] == NONE
    assert described["configs"]["message.max.bytes"]["value"] == broker.settings["message.max.bytes"]


# --- security ------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def secured():
    """One broker for both flows: SSL, mTLS (client certificates required), SASL_PLAINTEXT and SASL_SSL."""
    setup = SecuritySetup(listeners={"SSL": "SSL", "MTLS": "SSL", "SASL_PLAINTEXT": "SASL_PLAINTEXT",
                                     "SASL_SSL": "SASL_SSL"},
                          client_auth={"MTLS": "required"}, mechanisms=("PLAIN", "SCRAM-SHA-512", "OAUTHBEARER"))
    with secured_broker(setup) as running:
        yield running


def secured_for(ckgo, broker, listener: str, **options):
    """The adapter with librdkafka's settings for `listener` (the toolkit writes them for kcat, the librdkafka
    client taking plain strings), and that listener's bootstrap address."""
    return (ckgo.secured(broker.security.client_config("kcat", listener, **options)),
            broker.bootstrap_servers_for(listener))


def round_trip(client, bootstrap: str, broker, topic: str) -> None:
    sent = numbered(20, topic)
    client.produce(bootstrap, topic, sent)
    assert_same(sent, client.consume(bootstrap, topic, len(sent)))
    assert stored_values(broker, topic) == [record.value for record in sent]


@pytest.mark.matrix(flow="tls")
def test_tls_and_mtls(ckgo, secured, topic):
    for listener in ("SSL", "MTLS"):
        client, bootstrap = secured_for(ckgo, secured, listener)
        round_trip(client, bootstrap, secured, f"{topic}.{listener}")
    untrusting, bootstrap = secured_for(ckgo, secured, "SSL", ca_file=secured.security.certificates.untrusted_ca_file)
    failure = untrusting.connect_failure(bootstrap)
    assert failure.error in {"_SSL", "_TRANSPORT"} and "certificate verify failed" in failure.detail, failure
    expired = secured.security.certificates.expired_client
    uncertified, bootstrap = secured_for(ckgo, secured, "MTLS", certificate=expired)
    failure = uncertified.connect_failure(bootstrap)
    assert failure.error == "_TRANSPORT" and "certificate expired" in failure.detail, failure


@pytest.mark.matrix(flow="sasl")
def test_sasl_mechanisms_and_a_wrong_password(ckgo, secured, topic):
    for listener, mechanism in (("SASL_PLAINTEXT", "PLAIN"), ("SASL_SSL", "SCRAM-SHA-512"),
                                ("SASL_PLAINTEXT", "OAUTHBEARER")):
        client, bootstrap = secured_for(ckgo, secured, listener, mechanism=mechanism)
        round_trip(client, bootstrap, secured, f"{topic}.{mechanism}")
    for listener, mechanism in (("SASL_PLAINTEXT", "PLAIN"), ("SASL_SSL", "SCRAM-SHA-512")):
        refused, bootstrap = secured_for(ckgo, secured, listener, mechanism=mechanism, password="not-it")
        failure = refused.connect_failure(bootstrap)
        assert failure.error == "_AUTHENTICATION", failure
        assert f"SASL authentication error: {WRONG_PASSWORD[mechanism]}" in failure.detail, failure

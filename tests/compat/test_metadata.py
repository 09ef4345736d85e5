"""Metadata through each client's own call: named topics with their partitions and leaders, every topic, and an
unknown topic, which the broker creates only when the request allows it (Metadata v4+'s allow_auto_topic_creation;
before v4 a request always allows it).

What each client's call is (the adapters' `metadata`): kafka-python's and aiokafka's admin describe_topics with
describe_cluster, confluent-kafka's AdminClient.list_topics, `kcat -L`, kafkajs' admin fetchTopicMetadata with
describeCluster, and sarama's client (Metadata v0 with its default protocol) or, to ask without creating,
ClusterAdmin's DescribeTopics (Metadata v5). Where a client lets the broker create topics only from producers or
consumers, the adapter asks through one of those first, as an application would.

aiokafka cannot ask without allowing creation (its requests always set the flag), so naming an unknown topic creates
it: checked as such. test_sarama.py checks which Metadata version sarama's defaults send.
"""
from __future__ import annotations


def the_broker(broker) -> frozenset:
    return frozenset({(1, broker.host, broker.port)})


def test_named_topics_with_their_partitions_and_leaders(each_client, broker, reference, topic):
    three, one = f"{topic}.three", f"{topic}.one"
    reference.create_topics(broker.bootstrap, {three: 3, one: 1})
    view = each_client.metadata(broker.bootstrap, [three, one])
    assert view.brokers == the_broker(broker)
    assert view.topics == {three: {0: 1, 1: 1, 2: 1}, one: {0: 1}}


def test_every_topic(each_client, broker, reference, topic):
    reference.create_topics(broker.bootstrap, {f"{topic}.a": 2, f"{topic}.b": 5})
    view = each_client.metadata(broker.bootstrap)
    assert view.brokers == the_broker(broker)
    assert (view.topics[f"{topic}.a"], view.topics[f"{topic}.b"]) == ({0: 1, 1: 1}, {p: 1 for p in range(5)})
    listed = {name for name in view.topics if not name.startswith("__")}  # clients differ on internal topics
    assert listed == reference.list_topics(broker.bootstrap), "the client and kafka-python see different topics"


def test_an_unknown_topic_is_not_created_unless_allowed(each_client, broker, reference, topic):
    unknown = f"{topic}.unknown"
    view = each_client.metadata(broker.bootstrap, [unknown])
    if each_client.can_refuse_auto_creation:
        assert unknown not in view.topics, "reported as a topic with partitions"
        assert unknown not in reference.list_topics(broker.bootstrap), "created although the request refused it"
    else:  # aiokafka: its request allowed creation, so the topic exists now, as with Kafka
        assert unknown in reference.list_topics(broker.bootstrap)


def test_an_unknown_topic_is_created_when_allowed(each_client, broker, reference, topic):
    new = f"{topic}.created"
    view = each_client.metadata(broker.bootstrap, [new], auto_create=True)
    assert view.brokers == the_broker(broker)
    assert view.topics == {new: {0: 1}}, "the broker's num.partitions is 1"
    assert new in reference.list_topics(broker.bootstrap)

"""Listing every topic with librdkafka: its Metadata v9+ request for all topics ends with 3 stray bytes, which
Apache Kafka ignores; a broker that refuses them closes the connection and `kcat -L` fails.

Then every client lists every topic through the call it offers applications (the adapters' `list_topics`):
kafka-python's and aiokafka's KafkaConsumer.topics(), confluent-kafka's AdminClient.list_topics(), `kcat -L`, kafkajs'
admin listTopics() and sarama's ClusterAdmin.ListTopics(), which sends Metadata v0 with an empty topic list (v0's
"every topic") and then DescribeConfigs v0 for all the topics it was told about.
"""
from __future__ import annotations

import shutil
import subprocess

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from .records import Record


def test_confluent_kafka_lists_all_topics(broker, reference, topic):
    reference.produce(broker.bootstrap, topic, [Record(key=b"k", value=b"v")])
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    listed = admin.list_topics(timeout=10)
    assert topic in listed.topics and list(listed.brokers) == [1]
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    assert topic in producer.list_topics(timeout=10).topics


def test_kcat_lists_all_topics(broker, reference, topic):
    kcat = shutil.which("kcat")
    assert kcat, "kcat is missing: apt-get install -y kcat (tests/run.sh installs it)"
    reference.produce(broker.bootstrap, topic, [Record(key=b"k", value=b"v")])
    out = subprocess.run([kcat, "-b", broker.bootstrap, "-L", "-J"], capture_output=True, text=True, timeout=30,
                         check=True).stdout
    assert f'"topic":"{topic}"' in out.replace(" ", "")


def test_every_client_lists_every_topic(each_client, broker, reference, topic):
    made = {f"{topic}.one": 1, f"{topic}.many": 12}
    reference.create_topics(broker.bootstrap, made)
    reference.produce(broker.bootstrap, f"{topic}.auto", [Record(key=None, value=b"v")])  # auto-created
    listed = {name for name in each_client.list_topics(broker.bootstrap) if not name.startswith("__")}
    assert {*made, f"{topic}.auto"} <= listed
    assert listed == reference.list_topics(broker.bootstrap), "the client and kafka-python see different topics"

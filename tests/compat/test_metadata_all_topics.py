"""Listing every topic with librdkafka: its Metadata v9+ request for all topics ends with 3 stray bytes, which
Apache Kafka ignores; a broker that refuses them closes the connection and `kcat -L` fails."""
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

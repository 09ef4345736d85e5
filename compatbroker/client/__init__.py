"""A small synchronous Kafka client over compatbroker's own codecs, for the command line (and anyone else): it
speaks to any Kafka-compatible cluster, Apache Kafka included, negotiating every API's version with ApiVersions.

- `config.py`: `ClientConfig` (bootstrap, client id, Java-client property names: TLS, SASL, timeouts);
- `connection.py`: one blocking connection (framing, TLS, ApiVersions, SASL); `sasl.py`: PLAIN and SCRAM clients;
- `client.py`: `KafkaClient` (versions, routing, metadata, leaders, coordinators);
- `admin.py`: `Admin(client)`, the admin operations (topics, configs, offsets, groups, ACLs, SCRAM users);
- `errors.py`: `KafkaError(code, message)` named as Kafka names error codes, and its connection/timeout subclasses;
- `producer.py`, `partitioner.py`, `consumer.py`, `group_member.py`: writing and reading records, as a classic
  group member too (the command line's produce and consume); `consumer_protocol.py`: the subscription and
  assignment bytes of the consumer's embedded protocol.

Limits: one client per thread; SASL mechanisms PLAIN and SCRAM (no GSSAPI, no OAUTHBEARER); TLS files in PEM.
"""
from .client import BrokerMetadata, ClusterMetadata, KafkaClient, PartitionMetadata, TopicMetadata
from .config import ClientConfig
from .errors import ClientConfigError, KafkaConnectionError, KafkaError, KafkaTimeoutError

__all__ = ["BrokerMetadata", "ClientConfig", "ClientConfigError", "ClusterMetadata", "KafkaClient",
           "KafkaConnectionError", "KafkaError", "KafkaTimeoutError", "PartitionMetadata", "TopicMetadata"]

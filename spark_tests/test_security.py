"""The Java client (kafka-clients, as Spark carries it) and Spark's Kafka source against a secured compatbroker.

The module's main broker (EmbeddedBroker(security=...), as users start it: a subprocess) has a listener per secured
protocol: SSL, MTLS (SSL with `ssl.client.auth=required`), SASL_PLAINTEXT and SASL_SSL (PLAIN, SCRAM-SHA-512 and
OAUTHBEARER with Kafka's unsecured validator). Two more, in this process, validate signed OAUTHBEARER tokens against
a JWKS file, and make sessions last a few seconds (KIP-368's `connections.max.reauth.ms`). The Java client reads the
PEM CA and key stores itself (`ssl.truststore.type=PEM`, `ssl.keystore.type=PEM`); its unsecured token comes from
Kafka's unsecured login module (`unsecuredLoginStringClaim_sub`), its signed one from a file through
OAuthBearerLoginCallbackHandler.

- The Java producer and consumer write and read over each protocol and mechanism; a consumer fetching past its
  session's lifetime re-authenticates its connection and reads on.
- Refusals are the Java client's documented exceptions, thrown by the consumer's poll(): SslAuthenticationException
  ("SSL handshake failed") for a broker certificate it does not trust and for a client certificate the broker does
  not trust; SaslAuthenticationException carrying the broker's message for a wrong password (PLAIN, SCRAM) and for
  an expired token, unsecured or signed (the client answers the {"status":"invalid_token"} challenge, then the
  broker fails the authentication).
- Spark reads over SASL_SSL with `kafka.security.protocol`, `kafka.sasl.mechanism` and `kafka.sasl.jaas.config`.
- ACLs (StandardAuthorizer with allow.everyone.if.no.acl.found=true, so that the other tests need no bindings): a
  consumer denied READ on a topic gets TopicAuthorizationException naming it; a producer denied WRITE gets it from
  its send's future; nothing is written. The admin client (as the super user) creates, describes and deletes
  bindings with filters; a user denied ALTER on the cluster gets ClusterAuthorizationException.
The conftest's check that every request of the Java client was served (and that the broker logged no error) runs
after each test against this module's main broker.
"""
from __future__ import annotations

import collections
import time

import pytest

from compatbroker.toolkit.embedded import EmbeddedBroker
from compatbroker.toolkit.security import SecuritySetup

from .java_clients import DEADLINE_S, JavaAdmin, JavaConsumer, JavaProducer, java_exception_class

LISTENERS = {"SSL": "SSL", "MTLS": "SSL", "SASL_PLAINTEXT": "SASL_PLAINTEXT", "SASL_SSL": "SASL_SSL"}
SSL_FAILED = "org.apache.kafka.common.errors.SslAuthenticationException"
SASL_FAILED = "org.apache.kafka.common.errors.SaslAuthenticationException"
TOPIC_DENIED = "org.apache.kafka.common.errors.TopicAuthorizationException"
CLUSTER_DENIED = "org.apache.kafka.common.errors.ClusterAuthorizationException"
REAUTH_MS = 3000
TLS, SASL, ACLS = (pytest.mark.matrix(flow=flow) for flow in ("tls", "sasl", "acls"))


@pytest.fixture(scope="module")
def broker(connector):
    """This module's secured broker; it replaces the conftest's plaintext one for the tests here (and for the
    conftest's served-requests check)."""
    setup = SecuritySetup(listeners=LISTENERS, client_auth={"MTLS": "required"},
                          mechanisms=("PLAIN", "SCRAM-SHA-512", "OAUTHBEARER"), acls=True,
                          allow_everyone_if_no_acl_found=True)
    with EmbeddedBroker(security=setup, mode="subprocess", log_level="INFO") as running:
        yield running
    setup.cleanup()


@pytest.fixture(scope="module")
def jwks_broker(connector):
    """OAUTHBEARER with signed tokens (Kafka's OAuthBearerValidatorCallbackHandler against a JWKS file); the Java
    client reads its token from a file through OAuthBearerLoginCallbackHandler's `file:` token endpoint."""
    setup = SecuritySetup(listeners=("SASL_SSL",), mechanisms=("OAUTHBEARER",), oauthbearer="jwks",
                          oauth_issuer="https://issuer.compatbroker.test", oauth_audience="compatbroker")
    with EmbeddedBroker(security=setup) as running:
        yield running
    setup.cleanup()


@pytest.fixture(scope="module")
def reauth_broker(connector):
    """KIP-368: sessions of REAUTH_MS; the Java client re-authenticates at 85-95 % of a session's lifetime."""
    setup = SecuritySetup(listeners=("SASL_SSL",), mechanisms=("SCRAM-SHA-512",),
                          settings={"connections.max.reauth.ms": REAUTH_MS})
    with EmbeddedBroker(security=setup) as running:
        yield running
    setup.cleanup()


def java_config(broker, listener: str, **options) -> dict[str, str]:
    config = broker.client_config("java", listener, **options)
    config.pop("bootstrap.servers")
    return config


def first_error(consumer: JavaConsumer) -> BaseException:
    """Polls until the consumer raises (within the wrappers' deadline); the exception."""
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        try:
            consumer.poll_once()
        except Exception as exc:  # py4j's error carrying the Java exception
            return exc
    raise AssertionError(f"the consumer polled for {DEADLINE_S} s without an error")


def java_message(exc: BaseException) -> str:
    return exc.java_exception.getMessage()


@pytest.mark.parametrize("listener, mechanism", [
    pytest.param("SSL", None, marks=TLS),
    pytest.param("MTLS", None, marks=TLS),
    pytest.param("SASL_PLAINTEXT", "PLAIN", marks=SASL),
    pytest.param("SASL_SSL", "SCRAM-SHA-512", marks=SASL),
    pytest.param("SASL_SSL", "OAUTHBEARER", marks=SASL),
])
def test_java_client_produces_and_consumes(spark, broker, topic, listener, mechanism):
    options = {"mechanism": mechanism} if mechanism else {}
    config = java_config(broker, listener, **options)
    bootstrap = broker.bootstrap_servers_for(listener)
    broker.create_topic(topic, 1)
    values = [f"{listener}-{i}".encode() for i in range(5)]
    producer = JavaProducer(spark._jvm, bootstrap, **config)
    try:
        sent = producer.send(topic, [(0, None, value) for value in values])
    finally:
        producer.close()
    assert [record.offset for record in sent] == list(range(5))
    consumer = JavaConsumer(spark._jvm, bootstrap, **config, **{"auto.offset.reset": "earliest"})
    try:
        consumer.assign(topic, [0])
        assert [record.value for record in consumer.poll_until(5)] == values
    finally:
        consumer.close()


@SASL
def test_java_client_with_a_signed_token_produces_and_consumes(spark, jwks_broker, topic):
    config = java_config(jwks_broker, "SASL_SSL", mechanism="OAUTHBEARER")
    bootstrap = jwks_broker.bootstrap_servers_for("SASL_SSL")
    jwks_broker.create_topic(topic, 1)
    producer = JavaProducer(spark._jvm, bootstrap, **config)
    try:
        producer.send(topic, [(0, None, b"signed")])
    finally:
        producer.close()
    consumer = JavaConsumer(spark._jvm, bootstrap, **config, **{"auto.offset.reset": "earliest"})
    try:
        consumer.assign(topic, [0])
        assert [record.value for record in consumer.poll_until(1)] == [b"signed"]
    finally:
        consumer.close()


@SASL
def test_expired_signed_token_is_sasl_authentication_exception(spark, jwks_broker, topic):
    refused = refusal(spark, jwks_broker, topic, "SASL_SSL", mechanism="OAUTHBEARER",
                      token=jwks_broker.security.expired_token("alice"))
    assert java_exception_class(refused) == SASL_FAILED


@SASL
def test_java_client_reauthenticates_a_long_lived_connection(spark, reauth_broker, topic):
    """A consumer fetching past its session's lifetime: SaslHandshake and SaslAuthenticate again on the same
    connection (KIP-368), accepted by the broker, and the consumer goes on reading."""
    config = java_config(reauth_broker, "SASL_SSL")
    bootstrap = reauth_broker.bootstrap_servers_for("SASL_SSL")
    reauth_broker.create_topic(topic, 1)
    producer = JavaProducer(spark._jvm, bootstrap, **config)
    consumer = JavaConsumer(spark._jvm, bootstrap, **config, **{"auto.offset.reset": "earliest"})
    try:
        producer.send(topic, [(0, None, b"before")])
        consumer.assign(topic, [0])
        assert [record.value for record in consumer.poll_until(1)] == [b"before"]
        deadline = time.monotonic() + DEADLINE_S
        while not reauthenticated(reauth_broker, consumer.client_id):
            assert time.monotonic() < deadline, f"no re-authentication within {DEADLINE_S} s"
            assert consumer.poll_once() == []  # each poll waits up to POLL_MS for records: no sleep needed
        producer.send(topic, [(0, None, b"after")])
        assert [record.value for record in consumer.poll_until(1)] == [b"after"]
    finally:
        consumer.close()
        producer.close()


def reauthenticated(broker, client_id: str) -> bool:
    """Whether a connection of that client sent a second SaslHandshake (the first is its authentication)."""
    handshakes = collections.Counter(entry.peer for entry in broker.requests(api="SaslHandshake")
                                     if entry.client_id == client_id)
    return any(count >= 2 for count in handshakes.values())


def refusal(spark, broker, topic, listener, **options) -> BaseException:
    consumer = JavaConsumer(spark._jvm, broker.bootstrap_servers_for(listener), **java_config(broker, listener,
                                                                                             **options))
    try:
        consumer.assign(topic, [0])
        return first_error(consumer)
    finally:
        consumer.close()


@TLS
def test_untrusted_broker_certificate_is_ssl_authentication_exception(spark, broker, topic):
    refused = refusal(spark, broker, topic, "SSL", ca_file=broker.security.certificates.untrusted_ca_file)
    assert java_exception_class(refused) == SSL_FAILED
    assert java_message(refused) == "SSL handshake failed"


@TLS
def test_untrusted_client_certificate_is_ssl_authentication_exception(spark, broker, topic):
    refused = refusal(spark, broker, topic, "MTLS", certificate=broker.security.certificates.untrusted_client)
    assert java_exception_class(refused) == SSL_FAILED


@SASL
@pytest.mark.parametrize("listener, mechanism, message", [
    ("SASL_PLAINTEXT", "PLAIN", "Authentication failed: Invalid username or password"),
    ("SASL_SSL", "SCRAM-SHA-512", "Authentication failed during authentication due to invalid credentials with "
                                  "SASL mechanism SCRAM-SHA-512"),
])
def test_wrong_password_is_sasl_authentication_exception(spark, broker, topic, listener, mechanism, message):
    refused = refusal(spark, broker, topic, listener, mechanism=mechanism, password="wrong")
    assert java_exception_class(refused) == SASL_FAILED
    assert java_message(refused) == message


@SASL
def test_expired_token_is_sasl_authentication_exception(spark, broker, topic):
    refused = refusal(spark, broker, topic, "SASL_SSL", mechanism="OAUTHBEARER",
                      token=broker.security.expired_token("alice"))
    assert java_exception_class(refused) == SASL_FAILED


@SASL
def test_spark_reads_over_sasl_ssl(spark, broker, topic):
    config = java_config(broker, "SASL_SSL", mechanism="SCRAM-SHA-512")
    bootstrap = broker.bootstrap_servers_for("SASL_SSL")
    broker.create_topic(topic, 1)
    values = [f"spark-{i}".encode() for i in range(4)]
    producer = JavaProducer(spark._jvm, bootstrap, **config)
    try:
        producer.send(topic, [(0, None, value) for value in values])
    finally:
        producer.close()
    assert {"security.protocol", "sasl.mechanism", "sasl.jaas.config"} <= set(config)
    frame = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
             .options(**{f"kafka.{name}": value for name, value in config.items()})
             .option("subscribe", topic).load())
    rows = frame.select("offset", "value").orderBy("offset").collect()
    assert [(row.offset, bytes(row.value)) for row in rows] == list(enumerate(values))


@ACLS
def test_consumer_denied_read_gets_topic_authorization_exception(spark, broker, topic):
    broker.create_topic(topic, 1)
    broker.add_acl("TOPIC", topic, "User:alice", "READ", permission="DENY")
    refused = refusal(spark, broker, topic, "SASL_PLAINTEXT", user="alice")
    assert java_exception_class(refused) == TOPIC_DENIED
    assert list(refused.java_exception.unauthorizedTopics()) == [topic]


@ACLS
def test_producer_denied_write_gets_topic_authorization_exception(spark, broker, topic):
    broker.create_topic(topic, 1)
    broker.add_acl("TOPIC", topic, "User:alice", "WRITE", permission="DENY")
    producer = JavaProducer(spark._jvm, broker.bootstrap_servers_for("SASL_PLAINTEXT"),
                            **java_config(broker, "SASL_PLAINTEXT", user="alice"))
    try:
        with pytest.raises(Exception) as refused:
            producer.send(topic, [(0, None, b"denied")])
    finally:
        producer.close()
    cause = refused.value.java_exception.getCause()  # send()'s future fails with an ExecutionException
    assert cause is not None and cause.getClass().getName() == TOPIC_DENIED, java_message(refused.value)
    assert broker.records(topic, 0) == []


@ACLS
def test_admin_creates_describes_and_deletes_acls_with_filters(spark, broker, topic):
    carol = f"User:carol-{topic}"
    read_prefix = ("TOPIC", f"{topic}.", "PREFIXED", carol, "*", "READ", "ALLOW")
    deny_write = ("TOPIC", f"{topic}.audit", "LITERAL", carol, "*", "WRITE", "DENY")
    group_read = ("GROUP", f"{topic}.group", "LITERAL", carol, "*", "READ", "ALLOW")
    admin = JavaAdmin(spark._jvm, broker.bootstrap_servers_for("SASL_PLAINTEXT"),
                      **java_config(broker, "SASL_PLAINTEXT", user="admin"))
    try:
        admin.create_acls([read_prefix, deny_write, group_read])
        assert admin.describe_acls(("TOPIC", None, "ANY", carol, None, "ANY", "ANY")) == {read_prefix, deny_write}
        # MATCH: the literal binding of the name and the prefix covering it
        assert admin.describe_acls(("ANY", f"{topic}.audit", "MATCH", None, None, "ANY", "ANY")) == {
            read_prefix, deny_write}
        assert admin.delete_acls(("TOPIC", None, "PREFIXED", carol, None, "ANY", "ANY")) == {read_prefix}
        assert admin.describe_acls(("ANY", None, "ANY", carol, None, "ANY", "ANY")) == {deny_write, group_read}
    finally:
        admin.close()


@ACLS
def test_admin_denied_alter_on_the_cluster_gets_cluster_authorization_exception(spark, broker, topic):
    broker.add_acl("CLUSTER", "kafka-cluster", "User:bob", "ALTER", permission="DENY")  # else everyone may here
    admin = JavaAdmin(spark._jvm, broker.bootstrap_servers_for("SASL_PLAINTEXT"),
                      **java_config(broker, "SASL_PLAINTEXT", user="bob"))
    try:
        with pytest.raises(Exception) as refused:
            admin.create_acls([("TOPIC", topic, "LITERAL", "User:bob", "*", "ALL", "ALLOW")])
    finally:
        admin.close()
    cause = refused.value.java_exception.getCause()  # the result's future fails with an ExecutionException
    assert cause is not None and cause.getClass().getName() == CLUSTER_DENIED, java_message(refused.value)
    assert broker.acls(principal="User:bob", name=topic) == []

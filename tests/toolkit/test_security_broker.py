"""Secured embedded brokers end to end: every listener on its own port, real clients connecting with the toolkit's
configurations (TLS, mTLS, SASL PLAIN/SCRAM/OAUTHBEARER), SCRAM users and ACLs changed through the embedded broker
and the control API in both modes, the pytest fixtures, and `compatbroker serve --dev-tls`."""
from __future__ import annotations

import json
import os
import queue
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest

from compatbroker import EmbeddedBroker, SecuritySetup
from compatbroker.toolkit.embedded import EmbeddedBrokerError

MODES = ("thread", "subprocess")
LISTENERS = {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL", "MTLS": "SSL", "SASL_PLAINTEXT": "SASL_PLAINTEXT",
             "SASL_SSL": "SASL_SSL"}
CLIENT_TIMEOUT_MS = 15000
START_TIMEOUT_S = 60


def produce(config: dict, topic: str, value: bytes) -> int:
    """Produce one record with kafka-python and this configuration; its offset (raises what the client raises)."""
    from kafka import KafkaProducer
    producer = KafkaProducer(**config, request_timeout_ms=CLIENT_TIMEOUT_MS, max_block_ms=CLIENT_TIMEOUT_MS,
                             reconnect_backoff_max_ms=1000)
    try:
        return producer.send(topic, value, partition=0).get(timeout=CLIENT_TIMEOUT_MS / 1000).offset
    finally:
        producer.close(timeout=5)


def refused(config: dict, topic: str) -> Exception:
    """The exception kafka-python raises producing with this configuration (the test fails when it succeeds)."""
    with pytest.raises(Exception) as failure:
        produce(config, topic, b"refused")
    return failure.value


def connection_error(config: dict) -> str:
    """The first error confluent-kafka reports connecting with this librdkafka configuration (its error_cb comes at
    once, where kafka-python retries until its timeouts): the error's name and text."""
    from confluent_kafka import Producer

    errors: queue.Queue = queue.Queue()
    producer = Producer({**config, "error_cb": lambda error: errors.put(f"{error.name()}: {error.str()}"),
                         "log_level": 0, "reconnect.backoff.max.ms": 1000})
    deadline = time.monotonic() + CLIENT_TIMEOUT_MS / 1000
    try:
        while errors.empty() and time.monotonic() < deadline:
            producer.poll(0.2)
        return errors.get_nowait()
    finally:
        producer.flush(0)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    return SecuritySetup(listeners=LISTENERS, client_auth={"MTLS": "required"},
                         directory=tmp_path_factory.mktemp("security"))


@pytest.mark.parametrize("mode", MODES)
def test_every_listener_has_its_port_and_real_clients_connect_with_the_given_configurations(setup, mode):
    with EmbeddedBroker(security=setup, mode=mode) as broker:
        ports = broker.listener_ports[broker.node_ids[0]]
        assert list(ports) == list(LISTENERS) and len(set(ports.values())) == len(LISTENERS)
        assert broker.bootstrap_servers == broker.bootstrap_servers_for("PLAINTEXT") == f"127.0.0.1:{broker.port}"
        assert broker.bootstrap_servers_for("sasl_ssl") == f"127.0.0.1:{ports['SASL_SSL']}"
        broker.create_topic("secured", 1)
        cases = [("SSL", {}), ("MTLS", {}), ("SASL_PLAINTEXT", {"mechanism": "PLAIN"}),
                 ("SASL_SSL", {"mechanism": "SCRAM-SHA-512"}), ("SASL_SSL", {"mechanism": "SCRAM-SHA-256"}),
                 ("SASL_SSL", {"mechanism": "OAUTHBEARER"})]
        offsets = [produce(broker.client_config("kafka-python", listener, **options), "secured",
                           f"{listener}/{options}".encode()) for listener, options in cases]
        assert offsets == list(range(len(cases)))
        assert [record.value.decode() for record in broker.records("secured")] == \
            [f"{listener}/{options}" for listener, options in cases]
        with pytest.raises(ValueError, match="no listener 'SASL'"):
            broker.bootstrap_servers_for("SASL")


@pytest.mark.parametrize("case, expected", [
    ({"listener": "SASL_SSL", "mechanism": "SCRAM-SHA-512", "password": "wrong"},
     "_AUTHENTICATION: sasl_ssl://127.0.0.1:{port}/bootstrap: SASL authentication error: Authentication failed "
     "during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512"),
    ({"listener": "SASL_PLAINTEXT", "mechanism": "PLAIN", "password": "wrong"},
     "_AUTHENTICATION: sasl_plaintext://127.0.0.1:{port}/bootstrap: SASL authentication error: Authentication "
     "failed: Invalid username or password"),
    ({"listener": "SASL_SSL", "mechanism": "OAUTHBEARER", "token": "expired"},
     '_AUTHENTICATION: sasl_ssl://127.0.0.1:{port}/bootstrap: SASL authentication error: {{"status":"invalid_token"}}'),
    # librdkafka reports the refused certificate either way, depending on which of its threads sees it first
    ({"listener": "SSL", "ca_file": "untrusted"}, ("_SSL: ssl://127.0.0.1:{port}/bootstrap: SSL handshake failed",
                                                   "ssl://127.0.0.1:{port}/bootstrap: error:0A000086:SSL routines::"
                                                   "certificate verify failed")),
    ({"listener": "MTLS", "certificate": "expired"}, "certificate expired"),
    ({"listener": "MTLS", "certificate": "untrusted"}, "unknown ca"),
])
def test_wrong_credentials_and_certificates_are_refused(compatbroker_secure, compatbroker_security, case, expected):
    options = dict(case)
    listener = options.pop("listener")
    certificates = compatbroker_security.certificates
    if options.get("token") == "expired":
        options["token"] = compatbroker_security.expired_token("alice")
    if options.get("ca_file") == "untrusted":
        options["ca_file"] = certificates.untrusted_ca_file
    if "certificate" in options:
        options["certificate"] = getattr(certificates, f"{options['certificate']}_client")
    port = compatbroker_secure.listener_ports[compatbroker_secure.node_ids[0]][listener]
    error = connection_error(compatbroker_secure.client_config("confluent-kafka", listener, **options))
    alternatives = expected if isinstance(expected, tuple) else (expected,)
    assert any(wording.format(port=port) in error for wording in alternatives), error


@pytest.mark.parametrize("mode", MODES)
def test_scram_users_come_and_go_while_the_broker_runs(tmp_path, mode):
    setup = SecuritySetup(listeners=["SASL_PLAINTEXT"], mechanisms=["SCRAM-SHA-512"],
                          users={"alice": "alice-secret"}, directory=tmp_path / "security")
    with EmbeddedBroker(security=setup, mode=mode) as broker:
        assert broker.users() == {"alice": [{"mechanism": "SCRAM-SHA-512", "iterations": 4096}]}
        broker.create_topic("users", 1)
        carol = broker.client_config("kafka-python", "SASL_PLAINTEXT", user="carol", password="carol-secret")
        carol_librdkafka = broker.client_config("confluent-kafka", "SASL_PLAINTEXT", user="carol",
                                                password="carol-secret")
        assert "Authentication failed" in connection_error(carol_librdkafka)
        assert broker.add_user("carol", "carol-secret", ["SCRAM-SHA-512"], iterations=8192) == {
            "name": "carol", "credentials": [{"mechanism": "SCRAM-SHA-512", "iterations": 8192}]}
        assert produce(carol, "users", b"by carol") == 0
        broker.restart()  # credentials are kept in the data directory
        assert set(broker.users()) == {"alice", "carol"}
        assert broker.remove_user("carol") == {"name": "carol", "removed": ["SCRAM-SHA-512"]}
        assert "Authentication failed" in connection_error(carol_librdkafka)
        assert set(broker.users()) == {"alice"}


@pytest.mark.parametrize("mode", MODES)
def test_acls_are_added_listed_and_removed_and_the_authorizer_applies_them(tmp_path, mode):
    setup = SecuritySetup(listeners={"PLAINTEXT": "PLAINTEXT", "SASL_PLAINTEXT": "SASL_PLAINTEXT"},
                          mechanisms=["PLAIN"], acls=True, directory=tmp_path / "security")
    with EmbeddedBroker(security=setup, mode=mode) as broker:
        broker.create_topic("orders-1", 1)
        alice = broker.client_config("kafka-python", "SASL_PLAINTEXT", user="alice")
        assert "TopicAuthorizationFailed" in type(refused(alice, "orders-1")).__name__
        added = broker.add_acl("TOPIC", "orders-", "User:alice", "WRITE", pattern_type="PREFIXED")
        assert added == [{"resource_type": "TOPIC", "name": "orders-", "pattern_type": "PREFIXED",
                          "principal": "User:alice", "host": "*", "operation": "WRITE", "permission": "ALLOW"}]
        assert broker.add_acl("TOPIC", "orders-", "User:alice", "WRITE", pattern_type="PREFIXED") == []
        assert produce(alice, "orders-1", b"allowed") == 0
        assert produce(broker.client_config("kafka-python", "SASL_PLAINTEXT", user="admin"), "orders-1",
                       b"super user") == 1
        broker.add_acl("TOPIC", "orders-1", "User:alice", "WRITE", permission="DENY")
        assert "TopicAuthorizationFailed" in type(refused(alice, "orders-1")).__name__  # DENY wins
        assert len(broker.acls(principal="User:alice")) == 2
        broker.restart()  # ACLs are kept in the data directory
        assert broker.acls(permission="DENY") == [{"resource_type": "TOPIC", "name": "orders-1",
                                                    "pattern_type": "LITERAL", "principal": "User:alice",
                                                    "host": "*", "operation": "WRITE", "permission": "DENY"}]
        assert len(broker.remove_acls(resource_type="TOPIC", name="orders-1", pattern_type="MATCH")) == 2
        assert broker.acls() == []


def test_the_control_api_refuses_bad_users_and_acls_with_a_reason(tmp_path):
    setup = SecuritySetup(listeners=["SASL_PLAINTEXT"], mechanisms=["SCRAM-SHA-256"], directory=tmp_path / "sec")
    with EmbeddedBroker(security=setup, mode="subprocess") as broker:
        url = broker.control_url
        assert http(url, "POST", "/acls", {"acls": [{"resource_type": "TOPIC", "name": "t", "principal": "User:a",
                                                     "operation": "FLY"}]}) == \
            (400, "operation is one of ANY, ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, CLUSTER_ACTION, "
                  "DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, CREATE_TOKENS, DESCRIBE_TOKENS (or its code), "
                  "got 'FLY'")
        assert http(url, "POST", "/acls", {"acls": [{"resource_type": "CLUSTER", "name": "x", "principal": "User:a",
                                                     "operation": "ALTER"}]}) == \
            (400, "invalid ACL: The only valid name for the CLUSTER resource is kafka-cluster")
        assert http(url, "POST", "/acls", {"acls": [{"resource_type": "TransactionalId", "name": "tx",
                                                     "principal": "User:a", "operation": 4}]})[0] == 200
        assert http(url, "GET", "/acls?resource_type=5&operation=write")[1][0]["name"] == "tx"
        assert http(url, "DELETE", "/users", {"name": "nobody"}) == \
            (404, "no SCRAM credentials of user nobody for SCRAM-SHA-256, SCRAM-SHA-512")
        assert http(url, "POST", "/users", {"name": "a", "password": "p", "iterations": 100})[0] == 400
        assert http(url, "POST", "/users", {"name": "a", "password": "p", "mechanisms": ["PLAIN"]})[0] == 400


def http(url: str, method: str, path: str, body: dict | None = None) -> tuple[int, object]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())["error"]


def test_client_config_needs_a_secured_broker():
    with EmbeddedBroker() as broker:
        with pytest.raises(EmbeddedBrokerError, match="needs a secured broker"):
            broker.client_config("kafka-python", "SSL")
        assert broker.listener_ports == {broker.node_ids[0]: {"PLAINTEXT": broker.port}}


def test_a_secured_cluster_gives_every_node_each_listener(tmp_path):
    setup = SecuritySetup(listeners=["PLAINTEXT", "SASL_SSL"], mechanisms=["PLAIN"], directory=tmp_path / "sec")
    with EmbeddedBroker(security=setup, nodes=2) as broker:
        broker.create_topic("spread", 2, replication_factor=2)
        addresses = broker.bootstrap_servers_for("SASL_SSL").split(",")
        assert len(addresses) == 2
        assert {node.listeners["SASL_SSL"] for node in broker.nodes_status()} == set(addresses)
        assert produce(broker.client_config("kafka-python", "SASL_SSL"), "spread", b"v") == 0
        broker.restart()
        assert broker.bootstrap_servers_for("SASL_SSL").split(",") == addresses


# --- the pytest fixtures --------------------------------------------------------------------------------------------

def test_the_session_secure_broker_takes_mtls_and_sasl_clients(compatbroker_secure, compatbroker_security):
    assert compatbroker_secure.security is compatbroker_security
    compatbroker_secure.create_topic("fixture-secure", 1)
    produce(compatbroker_secure.client_config("kafka-python", "MTLS", user="bob"), "fixture-secure", b"mtls")
    produce(compatbroker_secure.client_config("kafka-python", "SASL_SSL", mechanism="SCRAM-SHA-512"),
            "fixture-secure", b"scram")
    assert [record.value for record in compatbroker_secure.records("fixture-secure")][-2:] == [b"mtls", b"scram"]


def test_the_factory_makes_brokers_of_other_setups(compatbroker_secure_factory):
    broker = compatbroker_secure_factory(listeners=["SASL_PLAINTEXT"], mechanisms=["OAUTHBEARER"],
                                         oauthbearer="jwks", acls=True, allow_everyone_if_no_acl_found=True)
    broker.create_topic("factory", 1)
    assert produce(broker.client_config("kafka-python", "SASL_PLAINTEXT"), "factory", b"jwks") == 0
    assert broker.security.oauthbearer == "jwks"


# --- compatbroker serve --dev-tls -----------------------------------------------------------------------------------

def serve_dev_tls(data_dir: str):
    """Start `compatbroker serve --dev-tls`; (process, its first three stdout lines)."""
    process = subprocess.Popen([sys.executable, "-m", "compatbroker", "serve", "--dev-tls", "--data-dir", data_dir,
                                "--listen", "127.0.0.1:0", "--log-level", "WARNING"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line.rstrip("\n")) for line in process.stdout], daemon=True).start()
    try:
        return process, [lines.get(timeout=START_TIMEOUT_S) for _ in range(3)]
    except queue.Empty:
        process.kill()
        raise


def stop(process) -> None:
    process.terminate()
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def test_dev_tls_adds_an_ssl_listener_clients_verify_with_the_printed_ca(tmp_path):
    data_dir = str(tmp_path / "data")
    process, lines = serve_dev_tls(data_dir)
    try:
        assert lines[0].startswith("compatbroker listening on 127.0.0.1:")
        assert lines[1].startswith("compatbroker listener SSL (SSL) on 127.0.0.1:")
        ssl_address = lines[1].rpartition(" ")[2]
        ca_file = os.path.join(data_dir, "dev-tls", "ca.pem")
        assert lines[2] == f"compatbroker dev TLS: CA certificate {ca_file} (listener SSL on {ssl_address})"
        context = ssl.create_default_context(cafile=ca_file)
        host, port = ssl_address.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=30) as sock:
            with context.wrap_socket(sock, server_hostname=host) as tls:
                assert tls.version() in ("TLSv1.2", "TLSv1.3")
        ca_pem = open(ca_file).read()
    finally:
        stop(process)
    process, lines = serve_dev_tls(data_dir)  # the CA stays: clients trusting it keep working
    stop(process)
    assert open(ca_file).read() == ca_pem


def test_the_control_command_line_manages_users_and_acls(tmp_path):
    from tests.toolkit.test_cli import control

    setup = SecuritySetup(listeners=["SASL_PLAINTEXT"], mechanisms=["SCRAM-SHA-256"], users={},
                          directory=tmp_path / "sec")
    with EmbeddedBroker(security=setup, control_listen="127.0.0.1:0") as broker:
        assert control(broker, "add-user", "carol", "pw", "--mechanism", "SCRAM-SHA-512", "--iterations", "4096") == \
            {"name": "carol", "credentials": [{"mechanism": "SCRAM-SHA-512", "iterations": 4096}]}
        assert control(broker, "users") == {"carol": [{"mechanism": "SCRAM-SHA-512", "iterations": 4096}]}
        assert control(broker, "remove-user", "carol") == {"name": "carol", "removed": ["SCRAM-SHA-512"]}
        binding = {"resource_type": "GROUP", "name": "g", "pattern_type": "LITERAL", "principal": "User:carol",
                   "host": "*", "operation": "READ", "permission": "ALLOW"}
        assert control(broker, "add-acl", "--resource-type", "group", "--name", "g", "--principal", "User:carol",
                       "--operation", "read") == [binding]
        assert control(broker, "acls", "--principal", "User:carol") == [binding]
        assert control(broker, "remove-acls", "--resource-type", "GROUP") == [binding]
        assert broker.acls() == []

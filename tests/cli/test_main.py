"""The root of the command line: --help at every level, --version, exit codes (usage 2, unreachable 3), the shared
client options (-b, --command-config, -X, --client-id, --format) on the root and on commands."""
from __future__ import annotations

import io
import socket
import sys
import time

import click
import pytest

from compatbroker import __version__
from compatbroker.cli.main import COMMANDS, cli
from compatbroker.cli.options import read_properties
from compatbroker.cli.output import make_console

from .helpers import run, run_process


def _all_command_paths():
    """Every group and command under the root, as argument lists."""
    ctx = click.Context(cli)
    paths = [[]]

    def walk(group, prefix):
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            paths.append([*prefix, name])
            if isinstance(command, click.Group):
                walk(command, [*prefix, name])

    walk(cli, [])
    return paths


@pytest.mark.parametrize("path", _all_command_paths(), ids=lambda path: " ".join(path) or "root")
def test_help_at_every_level(path):
    ran = run(*path, "--help")
    assert ran.code == 0, ran.stderr
    assert ran.stdout.startswith(f"Usage: compatbroker {' '.join(path)}".rstrip())
    assert "\x1b[" not in ran.stdout  # never colour when not a terminal


def test_every_command_of_the_issue_is_there():
    ctx = click.Context(cli)
    names = set(cli.list_commands(ctx))
    assert {"serve", "control", "topic", "cluster", "group", "acl", "user"} <= names
    verbs = {noun: set(cli.get_command(ctx, noun).list_commands(ctx)) for noun in ("topic", "cluster", "group",
                                                                                  "acl", "user")}
    assert verbs == {"topic": {"list", "create", "describe", "delete", "alter-config"}, "cluster": {"info"},
                     "group": {"list", "describe", "seek", "delete"}, "acl": {"list", "create", "delete"},
                     "user": {"list", "create", "delete"}}
    assert set(COMMANDS) >= names


def test_the_real_entry_point_prints_the_version_and_help():
    ran = run_process("--version")
    assert (ran.code, ran.stdout) == (0, f"compatbroker {__version__}\n")
    ran = run_process("topic", "--help")
    assert ran.code == 0 and "Usage: compatbroker topic" in ran.stdout and "Exit codes:" in ran.stdout


@pytest.mark.parametrize("args", [["no-such-noun"], ["topic", "no-such-verb"], ["topic", "create"],
                                  ["topic", "list", "--no-such-option"], ["--format", "yaml", "topic", "list"],
                                  ["topic", "create", "t", "-p", "0"], ["topic", "create", "t", "-c", "novalue"],
                                  ["topic", "list", "-X", "novalue"]])
def test_usage_errors_exit_2(args):
    ran = run(*args)
    assert ran.code == 2, (ran.stdout, ran.stderr)
    assert ran.stdout == "" and ("Error:" in ran.stderr or "Usage:" in ran.stderr)


def _unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_nothing_listening_exits_3_quickly():
    started = time.monotonic()
    port = _unused_port()
    ran = run_process("-b", f"127.0.0.1:{port}", "-X", "request.timeout.ms=1000", "topic", "list")
    assert ran.code == 3, ran.stderr
    assert ran.stdout == ""
    lines = ran.stderr.strip().splitlines()
    # one line while it waits for a broker that may be starting, then the error
    assert lines.count(f"compatbroker: waiting for 127.0.0.1:{port}: connection refused") == 1, ran.stderr
    last = lines[-1]
    assert last.startswith("compatbroker: topic list: NETWORK_EXCEPTION: "), ran.stderr
    assert time.monotonic() - started < 30  # generous: a child Python start plus a 1 s deadline


def test_an_unknown_client_property_is_a_usage_error(broker):
    ran = run("-b", broker.bootstrap_servers, "-X", "no.such.property=1", "cluster", "info")
    assert ran.code == 2
    assert "no.such.property" in ran.stderr and ran.stderr.startswith("compatbroker: ")


def test_options_on_the_command_win_over_the_root(broker):
    wrong = f"127.0.0.1:{_unused_port()}"
    ran = run("-b", wrong, "cluster", "info", "-b", broker.bootstrap_servers, "--format", "json")
    assert ran.code == 0, ran.stderr
    assert ran.json()["brokers"][0]["port"] == int(broker.bootstrap_servers.rsplit(":", 1)[1])


def test_bootstrap_from_the_environment(broker):
    ran = run("--format", "json", "cluster", "info", env={"COMPATBROKER_BOOTSTRAP": broker.bootstrap_servers})
    assert ran.json()["cluster_id"]


def test_command_config_and_client_id_reach_the_broker(broker, tmp_path):
    config = tmp_path / "client.properties"
    config.write_text(f"# a comment\nbootstrap.servers = {broker.bootstrap_servers}\nclient.id=from-file\n")
    since = max((entry.seq for entry in broker.requests()), default=0)
    ran = run("--command-config", str(config), "cluster", "info")
    assert ran.code == 0, ran.stderr
    assert "Cluster id" in ran.stdout
    assert {entry.client_id for entry in broker.requests(since)} == {"from-file"}
    since = max(entry.seq for entry in broker.requests())
    assert run("--command-config", str(config), "cluster", "info", "--client-id", "cli-test-client").code == 0
    assert {entry.client_id for entry in broker.requests(since)} == {"cli-test-client"}


def test_an_unreadable_command_config_is_a_usage_error(tmp_path):
    ran = run("--command-config", str(tmp_path / "missing.properties"), "cluster", "info")
    assert ran.code == 2
    assert "missing.properties" in ran.stderr


def test_java_properties_are_read_as_kafka_tools_read_them(tmp_path):
    path = tmp_path / "c.properties"
    path.write_text("! comment\n# comment\n  security.protocol = SASL_SSL\nsasl.mechanism:SCRAM-SHA-512\n"
                    'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n'
                    '    username="alice" password="a=b";\nempty=\nssl.truststore.location /tmp/ca\\u00e9.pem\n')
    assert read_properties(str(path)) == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                            'username="alice" password="a=b";',
        "empty": "", "ssl.truststore.location": "/tmp/caé.pem"}


def test_an_interrupted_command_exits_130(broker, monkeypatch):
    from compatbroker.client.admin import Admin

    def interrupted(self, internal=False):
        raise KeyboardInterrupt

    monkeypatch.setattr(Admin, "list_topics", interrupted)
    ran = run("-b", broker.bootstrap_servers, "topic", "list")
    assert (ran.code, ran.stdout) == (130, "")
    assert ran.stderr.endswith("compatbroker: interrupted\n")


class _Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.mark.parametrize("no_color", ["", "1"])
def test_tables_on_a_terminal_follow_no_color(monkeypatch, no_color):
    """Colour only on a terminal, and there not when $NO_COLOR is set (https://no-color.org)."""
    monkeypatch.setattr(sys, "stdout", _Terminal())
    monkeypatch.setenv("NO_COLOR", no_color)
    assert make_console().no_color is bool(no_color)
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    assert make_console().no_color is True

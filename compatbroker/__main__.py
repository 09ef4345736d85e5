"""The `compatbroker` command line (also `python -m compatbroker`).

- `compatbroker serve ...` runs the broker (`--nodes N`: a test cluster of N brokers in this process; `--dev-tls`:
  with an SSL listener and a generated CA, `compatbroker.toolkit.dev_tls`);
- `compatbroker control --control HOST:PORT COMMAND ...` talks to the control endpoint of a running broker (one
  started with `--control-listen`) and prints its answer as JSON.

This is the top layer: it wires the testing toolkit (`compatbroker.toolkit`: version emulation, fault injection,
the control endpoint) into the server, which never imports it. A plain `serve` loads none of the toolkit.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys

EXIT_BAD_CONFIG = 2
EXIT_CONTROL_FAILED = 1
EXIT_STARTUP_FAILED = 1
CONTROL_ENV = "COMPATBROKER_CONTROL"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="compatbroker", description="A Kafka wire-protocol compatible broker.")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_serve(sub)
    _add_control(sub)
    return parser


def _add_serve(sub) -> None:
    serve = sub.add_parser("serve", help="run the broker",
                           description="Run the broker until SIGTERM or SIGINT. Settings use Kafka's names.")
    serve.add_argument("--listen", metavar="HOST:PORT", action="append", default=[],
                       help="where to accept clients (listeners; default localhost:9092 on IPv4 and IPv6; "
                            "port 0 picks a free port). With --nodes N: once for every node (ports counting up "
                            "from it; port 0: a free one each) or N times, one per node")
    serve.add_argument("--advertised-listener", metavar="HOST:PORT",
                       help="the address clients are told to use (advertised.listeners; default: the listener)")
    serve.add_argument("--data-dir", metavar="DIR",
                       help="where the logs live (log.dirs; default $XDG_DATA_HOME/compatbroker or "
                            "~/.local/share/compatbroker)")
    serve.add_argument("--config", metavar="FILE", help="a server.properties file")
    serve.add_argument("--set", metavar="NAME=VALUE", action="append", default=[],
                       help="one setting by its Kafka name, e.g. --set num.partitions=3 (repeatable)")
    serve.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"],
                       help="how much the broker logs on stderr (default INFO)")
    serve.add_argument("--control-listen", metavar="HOST:PORT",
                       help="also serve the HTTP/JSON control API for tests (fault injection, down/up, topics, "
                            "records, committed offsets, request log) on this address, port 0 for a free one; "
                            "its URL is printed as a second stdout line, 'compatbroker control on URL'")
    serve.add_argument("--dev-tls", action="store_true",
                       help="serve TLS with a generated CA and broker certificate (kept in DATA_DIR/dev-tls/): adds "
                            "an SSL listener (the first listener's port + 1) unless there is one, and prints where "
                            "the CA certificate clients must trust is")
    serve.add_argument("--emulate", metavar="RELEASE",
                       help="advertise and serve the API versions of this Apache Kafka release (e.g. 3.9)")
    serve.add_argument("--nodes", metavar="N", type=_positive, default=1,
                       help="run a test cluster of N brokers in this process, node ids 0..N-1, each with its own "
                            "listener and its logs in DATA_DIR/node-ID/ (default 1: a single broker)")
    serve.add_argument("--node-ids", metavar="ID,ID,...", type=_node_ids,
                       help="the nodes' ids instead of 0..N-1 (their count is the node count)")
    serve.add_argument("--racks", metavar="RACK,RACK,...", type=_racks,
                       help="each node's broker.rack, one per node (an empty one: no rack)")


def _add_control(sub) -> None:
    control = sub.add_parser(
        "control", help="drive a running broker's control API",
        description="Send one command to the control endpoint of a broker started with --control-listen and "
                    "print the answer as JSON.")
    control.add_argument("--control", metavar="HOST:PORT", default=os.environ.get(CONTROL_ENV),
                         help=f"the control endpoint (default ${CONTROL_ENV})")
    commands = control.add_subparsers(dest="control_command", required=True, metavar="COMMAND")

    inject = commands.add_parser("inject-error", help="answer the next requests of an API with an error")
    inject.add_argument("api", help="Kafka's API name (Produce, Fetch, OffsetCommit...) or key")
    inject.add_argument("error", help="Kafka's error name (NOT_LEADER_OR_FOLLOWER...) or code")
    inject.add_argument("--count", type=_count, default=1, help="how many requests (default 1; 'all': until "
                                                                 "cleared)")
    inject.add_argument("--topic", help="only requests that name this topic")

    latency = commands.add_parser("inject-latency", help="delay requests of an API (or of every API)")
    latency.add_argument("api", help="Kafka's API name or key, or 'all'")
    latency.add_argument("ms", type=float, help="milliseconds to wait before serving (0 removes the delay)")
    latency.add_argument("--count", type=_count, default=None, help="how many requests (default: until cleared)")

    drops = commands.add_parser("drop-connections", help="close a client's connection instead of answering")
    drops.add_argument("--after", type=int, default=0, help="serve this many requests first (default 0)")
    drops.add_argument("--api", help="count and drop only requests of this API")
    drops.add_argument("--count", type=_count, default=1, help="how many drops (default 1; 'all': until cleared)")

    commands.add_parser("clear-faults", help="remove every fault rule")
    commands.add_parser("faults", help="show the fault rules in force")
    commands.add_parser("down", help="close the listeners and cut every client connection")
    commands.add_parser("up", help="listen again on the same ports")
    commands.add_parser("status", help="up or down, bootstrap servers, cluster id")
    commands.add_parser("topics", help="list the topics")

    commands.add_parser("nodes", help="the cluster's nodes: address, rack, up, alive, isolated, leaders")
    for name, text in (("stop-node", "stop a node: its leaders fail over, its listener closes"),
                       ("start-node", "start a stopped node again on the same port")):
        commands.add_parser(name, help=text).add_argument("node_id", type=int)
    isolate = commands.add_parser("isolate-node", help="cut a node off from replication (it falls out of the ISRs)")
    isolate.add_argument("node_id", type=int)
    isolate.add_argument("--undo", action="store_true", help="let it replicate again")
    delay = commands.add_parser("delay-follower", help="make a node copy from its leaders late")
    delay.add_argument("node_id", type=int)
    delay.add_argument("ms", type=float, help="milliseconds (0 removes the delay)")
    commands.add_parser("restore-nodes", help="undo every node fault (stopped, isolated, delayed, down)")
    leader = commands.add_parser("leader", help="show a partition's leader, leader epoch, replicas and ISR")
    leader.add_argument("topic")
    leader.add_argument("partition", type=int, nargs="?", default=0)
    move = commands.add_parser("move-leader", help="make a node of the partition's ISR its leader")
    move.add_argument("topic")
    move.add_argument("partition", type=int)
    move.add_argument("node_id", type=int)

    add_user = commands.add_parser("add-user", help="store a user's SCRAM credentials")
    add_user.add_argument("name")
    add_user.add_argument("password")
    add_user.add_argument("--mechanism", action="append", dest="mechanisms",
                          help="SCRAM-SHA-256 or SCRAM-SHA-512 (repeatable; default both)")
    add_user.add_argument("--iterations", type=int, default=4096, help="PBKDF2 iterations (default 4096)")
    remove_user = commands.add_parser("remove-user", help="delete a user's SCRAM credentials")
    remove_user.add_argument("name")
    remove_user.add_argument("--mechanism", action="append", dest="mechanisms", help="only this one (repeatable)")
    commands.add_parser("users", help="show the users with SCRAM credentials")
    for name, text in (("acls", "show the ACL bindings matching a filter"),
                       ("add-acl", "add an ACL binding"),
                       ("remove-acls", "remove the ACL bindings matching a filter")):
        acl = commands.add_parser(name, help=text)
        needed = name == "add-acl"  # a binding names its resource, principal and operation; a filter need not
        acl.add_argument("--resource-type", required=needed, help="TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, ...")
        acl.add_argument("--name", required=needed, help="the resource name (kafka-cluster for CLUSTER)")
        acl.add_argument("--pattern-type", help="LITERAL (default for add-acl), PREFIXED; in filters also MATCH")
        acl.add_argument("--principal", required=needed, help="e.g. User:alice")
        acl.add_argument("--host", help="a client IP address, or * (default for add-acl)")
        acl.add_argument("--operation", required=needed, help="READ, WRITE, DESCRIBE, ALL, ...")
        acl.add_argument("--permission", help="ALLOW (default for add-acl) or DENY")

    records = commands.add_parser("records", help="show the records stored in a partition")
    records.add_argument("topic")
    records.add_argument("partition", type=int, nargs="?", default=0)
    records.add_argument("--offset", type=int, help="first offset (default: the log start)")
    records.add_argument("--limit", type=int, default=1000, help="at most this many records (default 1000)")
    records.add_argument("--text", action="store_true", help="show keys, values and header values as UTF-8 text "
                                                             "instead of base64")

    offsets = commands.add_parser("offsets", help="show a group's committed offsets (a share group's start offsets)")
    offsets.add_argument("group")
    commands.add_parser("groups", help="show every group: type (classic, consumer, share), state, protocol type")
    group = commands.add_parser("group", help="describe a group of any type: state, epoch, members, assignments")
    group.add_argument("group")

    transactions = commands.add_parser("transactions", help="show the transaction coordinator's transactional ids")
    transactions.add_argument("transactional_id", nargs="?", help="only this one")

    requests = commands.add_parser("requests", help="show the log of requests received")
    requests.add_argument("--since", type=int, default=0, help="only entries numbered above this")
    requests.add_argument("--api", help="only requests of this API")
    requests.add_argument("--clear", action="store_true", help="empty the log instead")


def _count(text: str) -> int | None:
    if text.lower() in ("all", "none", "unlimited"):
        return None
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1, or 'all'")
    return value


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _node_ids(text: str) -> list[int]:
    try:
        ids = [int(item) for item in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected node ids like 1,2,3, got {text!r}") from None
    if min(ids) < 0 or len(set(ids)) != len(ids):
        raise argparse.ArgumentTypeError(f"node ids must be distinct and not negative, got {text!r}")
    return ids


def _racks(text: str) -> list[str | None]:
    return [rack.strip() or None for rack in text.split(",")]


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "serve":
        return serve(args)
    if args.command == "control":
        return control(args)
    return 0


def serve(args) -> int:
    from .config import BrokerConfig, ConfigError

    logging.basicConfig(level=args.log_level, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        overrides = list(args.set)
        if args.node_ids is not None:
            if args.nodes not in (1, len(args.node_ids)):
                raise ConfigError(f"--node-ids: {len(args.node_ids)} ids for --nodes {args.nodes}")
            args.nodes = len(args.node_ids)
        if args.racks is not None:
            if len(args.racks) != args.nodes:
                raise ConfigError(f"--racks: one rack per node ({args.nodes}), got {len(args.racks)}")
            if args.nodes == 1:  # a single broker's rack is its broker.rack
                overrides.append(f"broker.rack={args.racks[0] or ''}")
        config = BrokerConfig.from_sources(config_file=args.config, overrides=overrides,
                                           listen=args.listen[0] if args.listen else None,
                                           advertised_listener=args.advertised_listener, data_dir=args.data_dir)
        if args.dev_tls:
            config = _with_dev_tls(args, config, overrides)
        options = _cluster_options(args, config)
    except ConfigError as exc:
        print(f"compatbroker: {exc}", file=sys.stderr)
        return EXIT_BAD_CONFIG
    from .server import StartupError, run
    if args.emulate is not None or args.control_listen is not None:
        from .toolkit.runtime import toolkit_for
        try:
            options.update(toolkit_for(emulate=args.emulate, control_listen=args.control_listen).runtime_options())
        except StartupError as exc:
            print(f"compatbroker: {exc}", file=sys.stderr)
            return EXIT_STARTUP_FAILED
    if args.dev_tls:
        from .toolkit.dev_tls import DevTlsNotice, ca_file_of
        options["services"] = [*options.get("services", []), DevTlsNotice(ca_file_of(config))]
    return run(config, **options)


def _with_dev_tls(args, config, overrides: list[str]):
    """The configuration with --dev-tls's SSL listener and generated keystore (compatbroker.toolkit.dev_tls)."""
    from .config import BrokerConfig, ConfigError
    from .toolkit.dev_tls import dev_tls_overrides

    if len(args.listen) > 1:
        raise ConfigError("--dev-tls: give the SSL listeners of each node in --listen yourself, or one --listen")
    try:
        added = dev_tls_overrides(config, args.nodes)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"--dev-tls: cannot make the certificates: {exc}") from None
    # `listeners` now comes from the overrides, which already hold the --listen address
    return BrokerConfig.from_sources(config_file=args.config, overrides=[*overrides, *added],
                                     listen=None if any(item.startswith("listeners=") for item in added)
                                     else (args.listen[0] if args.listen else None),
                                     advertised_listener=args.advertised_listener, data_dir=args.data_dir)


def _cluster_options(args, config) -> dict:
    """The runtime's node count, racks and per-node listeners from --nodes, --racks and --listen (ConfigError)."""
    from .config import ConfigError
    from .server.run import cluster_listeners

    if args.nodes == 1 and args.node_ids is None:
        if len(args.listen) > 1:
            raise ConfigError(f"--listen: one address for a single broker, got {len(args.listen)} (see --nodes)")
        return {}
    if args.advertised_listener is not None:
        raise ConfigError("--advertised-listener names one broker's address; with --nodes each node advertises "
                          "its own listener")
    return {"nodes": args.nodes, "node_ids": args.node_ids, "racks": args.racks,
            "node_listeners": cluster_listeners(config, args.nodes, args.listen)}


def control(args) -> int:
    from .toolkit.control import ControlError
    from .toolkit.control.client import ControlClient

    if not args.control:
        print(f"compatbroker control: give the endpoint with --control HOST:PORT (or ${CONTROL_ENV})",
              file=sys.stderr)
        return EXIT_BAD_CONFIG
    client = ControlClient(args.control)
    try:
        answer = _control_call(client, args)
    except ControlError as exc:
        print(f"compatbroker control: {exc.message}", file=sys.stderr)
        return EXIT_CONTROL_FAILED
    print(json.dumps(answer, indent=2, default=_json_default(args)))
    return 0


def _control_call(client, args):
    command = args.control_command
    if command == "inject-error":
        return client.inject_error(args.api, args.error, args.count, args.topic)
    if command == "inject-latency":
        return client.inject_latency(None if args.api.lower() == "all" else args.api, args.ms, args.count)
    if command == "drop-connections":
        return client.drop_connections_after(args.after, args.api, args.count)
    if command == "records":
        return client.records(args.topic, args.partition, args.offset, args.limit)
    if command == "offsets":
        return client.committed_offsets(args.group)
    if command == "group":
        return client.describe_group(args.group)
    if command == "transactions":
        return client.transactions(args.transactional_id)
    if command == "requests":
        return client.clear_requests() if args.clear else client.requests(args.since, args.api)
    if command == "add-user":
        return client.add_user(args.name, args.password, args.mechanisms, args.iterations)
    if command == "remove-user":
        return client.remove_user(args.name, args.mechanisms)
    if command in ("acls", "add-acl", "remove-acls"):
        fields = {"resource_type": args.resource_type, "name": args.name, "pattern_type": args.pattern_type,
                  "principal": args.principal, "host": args.host, "operation": args.operation,
                  "permission": args.permission}
        if command == "add-acl":
            return client.add_acls([{key: value for key, value in fields.items() if value is not None}])
        return (client.acls if command == "acls" else client.remove_acls)(**fields)
    if command in ("stop-node", "start-node"):
        return (client.stop_node if command == "stop-node" else client.start_node)(args.node_id)
    if command == "isolate-node":
        return client.isolate_node(args.node_id, not args.undo)
    if command == "delay-follower":
        return client.delay_follower(args.node_id, args.ms)
    if command == "leader":
        return client.leader(args.topic, args.partition)
    if command == "move-leader":
        return client.move_leader(args.topic, args.partition, args.node_id)
    simple = {"clear-faults": client.clear_faults, "faults": client.faults, "down": client.down, "up": client.up,
              "status": client.status, "topics": client.topics, "nodes": client.nodes,
              "restore-nodes": client.restore_nodes, "users": client.users, "groups": client.groups}
    return simple[command]()


def _json_default(args):
    """Bytes of records as the user asked: base64 (as the HTTP API gives them) or text."""
    import base64

    def convert(value):
        if isinstance(value, (bytes, bytearray)):
            if getattr(args, "text", False):
                return bytes(value).decode("utf-8", "replace")
            return base64.b64encode(bytes(value)).decode("ascii")
        raise TypeError(f"cannot show {type(value).__name__} as JSON")

    return convert


if __name__ == "__main__":
    sys.exit(main())

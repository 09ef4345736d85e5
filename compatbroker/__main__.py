"""The `compatbroker` command line (also `python -m compatbroker`).

- `compatbroker serve ...` runs the broker;
- `compatbroker control --control HOST:PORT COMMAND ...` talks to the control endpoint of a running broker (one
  started with `--control-listen`) and prints its answer as JSON.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys

EXIT_BAD_CONFIG = 2
EXIT_CONTROL_FAILED = 1
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
    serve.add_argument("--listen", metavar="HOST:PORT",
                       help="where to accept clients (listeners; default localhost:9092 on IPv4 and IPv6; "
                            "port 0 picks a free port)")
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
    serve.add_argument("--emulate", metavar="RELEASE",
                       help="advertise and serve the API versions of this Apache Kafka release (e.g. 3.9)")


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

    records = commands.add_parser("records", help="show the records stored in a partition")
    records.add_argument("topic")
    records.add_argument("partition", type=int, nargs="?", default=0)
    records.add_argument("--offset", type=int, help="first offset (default: the log start)")
    records.add_argument("--limit", type=int, default=1000, help="at most this many records (default 1000)")
    records.add_argument("--text", action="store_true", help="show keys, values and header values as UTF-8 text "
                                                             "instead of base64")

    offsets = commands.add_parser("offsets", help="show a consumer group's committed offsets")
    offsets.add_argument("group")

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
        config = BrokerConfig.from_sources(config_file=args.config, overrides=args.set, listen=args.listen,
                                           advertised_listener=args.advertised_listener, data_dir=args.data_dir)
    except ConfigError as exc:
        print(f"compatbroker: {exc}", file=sys.stderr)
        return EXIT_BAD_CONFIG
    from .server import run
    return run(config, control_listen=args.control_listen, emulate=args.emulate)


def control(args) -> int:
    from .control import ControlError
    from .control.client import ControlClient

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
    if command == "transactions":
        return client.transactions(args.transactional_id)
    if command == "requests":
        return client.clear_requests() if args.clear else client.requests(args.since, args.api)
    simple = {"clear-faults": client.clear_faults, "faults": client.faults, "down": client.down, "up": client.up,
              "status": client.status, "topics": client.topics}
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

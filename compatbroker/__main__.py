"""The `compatbroker` command line (also `python -m compatbroker`)."""
from __future__ import annotations

import argparse
import logging
import sys

EXIT_BAD_CONFIG = 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="compatbroker", description="A Kafka wire-protocol compatible broker.")
    sub = parser.add_subparsers(dest="command", required=True)
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
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "serve":
        return serve(args)
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
    return run(config)


if __name__ == "__main__":
    sys.exit(main())

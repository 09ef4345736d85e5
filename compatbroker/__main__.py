"""The `compatbroker` command line."""
from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="compatbroker", description="A Kafka wire-protocol compatible broker.")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("serve", help="run the broker")
    args = parser.parse_args(argv)
    if args.command == "serve":
        # The network layer arrives with the broker-server work; until then say so plainly.
        print("compatbroker serve: the broker server is not part of this build yet", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

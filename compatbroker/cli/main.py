"""The root of the `compatbroker` command line: `compatbroker [OPTIONS] NOUN VERB ...` (click).

`main(argv=None) -> int` runs it and returns the exit code (`compatbroker.cli.errors`), for the console script,
`python -m compatbroker` and tests; `cli` is the click group. The commands:

- `serve`, `control`: the broker itself and its testing toolkit's control endpoint (cli/serve.py, cli/control.py);
- `topic`, `cluster`, `group`, `acl`, `user`, `produce`, `consume`: clients of any Kafka-compatible broker, over
  the Kafka protocol (`compatbroker.client`), sharing the options of cli/options.py.

Commands are imported when they run, so `compatbroker serve` loads no client code and a command module that fails
to import breaks only itself.
"""
from __future__ import annotations

import importlib
import os
import sys

import click

from .. import __version__
from .errors import EXIT_CODES_HELP, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, from_kafka_error
from .options import client_options

PROG_NAME = "compatbroker"

# name -> (module under compatbroker.cli, attribute, one-line help shown in `compatbroker --help`)
COMMANDS = {
    "serve": ("serve", "serve", "run the broker"),
    "control": ("control", "control", "drive a running broker's control API"),
    "topic": ("topic", "topic", "list, create, describe, delete topics and alter their configs"),
    "cluster": ("cluster", "cluster", "the cluster's id, controller, brokers and features"),
    "group": ("group", "group", "consumer groups: list, describe with lag, reset offsets, delete"),
    "acl": ("acl", "acl", "list, create and delete ACL bindings"),
    "user": ("user", "user", "SCRAM credentials: list, create, delete"),
    "produce": ("produce", "produce", "write records from stdin to a topic"),
    "consume": ("consume", "consume", "read records from a topic"),
    "matrix": ("matrix", "matrix", "where the latest compatibility matrix (tests/compat) is"),
}


class LazyGroup(click.Group):
    """A group whose commands (COMMANDS) are imported when used; its help lists them without importing them."""

    def list_commands(self, ctx):
        return list(COMMANDS)

    def get_command(self, ctx, name):
        if name not in COMMANDS:
            return None
        module_name, attribute, _ = COMMANDS[name]
        return getattr(importlib.import_module(f"{__package__}.{module_name}"), attribute)

    def format_commands(self, ctx, formatter):
        with formatter.section("Commands"):
            formatter.write_dl([(name, help_text) for name, (_, _, help_text) in COMMANDS.items()])


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110},
             epilog=EXIT_CODES_HELP)
@click.version_option(__version__, "--version", prog_name=PROG_NAME, message="%(prog)s %(version)s")
@client_options
def cli():
    """A Kafka wire-protocol compatible broker, and a command line for any Kafka cluster.

    `compatbroker serve` runs the broker; the other commands talk to any Kafka-compatible bootstrap server
    (-b HOST:PORT, default localhost:9092) over the Kafka protocol.
    """


def main(argv=None) -> int:
    """Run the command line on `argv` (default sys.argv[1:]) and return its exit code."""
    try:
        result = cli.main(args=argv, prog_name=PROG_NAME, standalone_mode=False)
    except (click.exceptions.Abort, KeyboardInterrupt):  # Ctrl-C (click turns KeyboardInterrupt into Abort)
        click.echo("compatbroker: interrupted", err=True)
        return EXIT_INTERRUPTED
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except BrokenPipeError:  # `compatbroker ... | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FAILED
    except Exception as exc:
        if not _is_kafka_error(exc):
            raise
        error = from_kafka_error("request", exc)  # a command that did not name what failed
        error.show()
        return error.exit_code
    return result if isinstance(result, int) else EXIT_OK


def _is_kafka_error(exc: Exception) -> bool:
    from ..client.errors import KafkaError  # imported late: it loads the protocol codecs

    return isinstance(exc, KafkaError)


if __name__ == "__main__":
    sys.exit(main())

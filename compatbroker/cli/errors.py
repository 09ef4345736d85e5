"""Exit codes scripts can rely on, and the one-line error messages on stderr.

    0    ok
    1    the broker answered with an error, or some of the items asked for failed
    2    usage error (click's own: unknown option, bad value, missing argument; also a bad `serve` configuration)
    3    cannot connect to the bootstrap server, or a request timed out
    130  interrupted (Ctrl-C)

A command reports a failure by raising `CliError` (or, for one of several items, with `Failures`);
`kafka_errors(what)` turns the client's `KafkaError` into one (and `compatbroker.cli.main.main` any that escapes).
The message on stderr is `compatbroker: <what>: <ERROR_NAME>: <message>`, on one line: control characters in names
and messages (a group named with a newline or an escape sequence) are shown escaped by `visible`, as tables show
them too.
"""
from __future__ import annotations

import re
import sys
from contextlib import contextmanager

import click

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_INTERRUPTED = 130

EXIT_CODES_HELP = ("Exit codes: 0 ok; 1 the broker answered an error or some items failed; 2 usage error; "
                   "3 cannot connect or timed out; 130 interrupted.")


class CliError(click.ClickException):
    """A failure to report as `compatbroker: <what>: <ERROR_NAME>: <message>` and exit with `exit_code`."""

    def __init__(self, what: str, name: str | None, message: str, exit_code: int = EXIT_FAILED):
        super().__init__(message)
        self.what, self.name, self.exit_code = what, name, exit_code

    def format_message(self) -> str:
        parts = ["compatbroker", self.what, self.name, self.message]
        return ": ".join(visible(part) for part in parts if part)

    def show(self, file=None) -> None:
        click.echo(self.format_message(), file=file or sys.stderr)


# C0 and C1 controls, DEL, and the Unicode line and paragraph separators
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def visible(text: str) -> str:
    """`text` with its control characters escaped as Python writes them (`\\n`, `\\x1b`): a name from the broker can
    neither break a line that scripts read nor send escape sequences to the terminal."""
    return _CONTROL.sub(lambda match: repr(match.group())[1:-1], text)


def report(what: str, name: str | None, message: str) -> None:
    """One error line on stderr for an item that failed while others went on (the command then exits 1)."""
    click.echo(CliError(what, name, message).format_message(), err=True)


class Failures:
    """The items of a command that failed while the others went on (`compatbroker topic delete a b`): each is
    reported at once as one error line on stderr, and the command then exits 1 (`exit_code`)."""

    def __init__(self):
        self.failed = False

    def add(self, what: str, error) -> None:
        """Reports the `compatbroker.client.KafkaError` of item `what`."""
        report(what, error.name, error.message)
        self.failed = True

    @property
    def exit_code(self) -> int:
        return EXIT_FAILED if self.failed else EXIT_OK


def from_kafka_error(what: str, error) -> CliError:
    """A CliError for a `compatbroker.client.KafkaError`: exit 3 when the broker was never reached, else 1."""
    return CliError(what, error.name, error.message, EXIT_UNREACHABLE if is_unreachable(error) else EXIT_FAILED)


def is_unreachable(error) -> bool:
    """Whether a client error means no answer came: nothing listening, connection lost, TLS failed, timed out."""
    from ..client.errors import KafkaConnectionError, KafkaTimeoutError

    return isinstance(error, (KafkaConnectionError, KafkaTimeoutError))


@contextmanager
def kafka_errors(what: str):
    """Turns a `compatbroker.client.KafkaError` raised inside into the CliError to report for `what`."""
    from ..client.errors import KafkaError

    try:
        yield
    except KafkaError as exc:
        raise from_kafka_error(what, exc) from None


def error_json(error) -> dict | None:
    """{"code", "name", "message"} of a KafkaError (None for no error): the form --format json uses."""
    return None if error is None else error.to_json()

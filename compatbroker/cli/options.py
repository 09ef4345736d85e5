"""The options every client command shares, accepted on the root group and on each command.

    -b/--bootstrap-server HOST:PORT   default localhost:9092, or $COMPATBROKER_BOOTSTRAP
    --command-config FILE             client properties (Java properties format, as Kafka's tools read them)
    -X key=value                      one client property (repeatable, as kcat's -X); wins over --command-config
    --client-id ID                    default compatbroker-cli
    --format table|json               tables for people (default), one JSON document for scripts

A value given on the command wins over one given on the root (`compatbroker -b a topic list -b b` uses b); -X
properties of both are merged. `settings(ctx)` resolves them, `make_client(ctx)` builds the client and
`make_admin(ctx)` the admin operations over it.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

import click

from .errors import CliError, EXIT_USAGE

BOOTSTRAP_ENV = "COMPATBROKER_BOOTSTRAP"
DEFAULT_BOOTSTRAP = "localhost:9092"
DEFAULT_CLIENT_ID = "compatbroker-cli"
FORMATS = ("table", "json")


@dataclass
class CliSettings:
    """The client options given so far (root first, then the command)."""
    bootstrap: str | None = None
    command_config: str | None = None
    properties: dict[str, str] = field(default_factory=dict)
    client_id: str | None = None
    format: str | None = None


def settings(ctx: click.Context) -> CliSettings:
    """The shared options as given: bootstrap is -b, else $COMPATBROKER_BOOTSTRAP, else None (then the client
    takes the `bootstrap.servers` property, else localhost:9092); client_id None likewise means the `client.id`
    property, else compatbroker-cli; format defaults to table."""
    given = ctx.ensure_object(CliSettings)
    return CliSettings(bootstrap=given.bootstrap or os.environ.get(BOOTSTRAP_ENV) or None,
                       command_config=given.command_config, properties=dict(given.properties),
                       client_id=given.client_id, format=given.format or "table")


def output_format(ctx: click.Context) -> str:
    return settings(ctx).format


def make_client(ctx: click.Context, extra_names=()):
    """A `compatbroker.client.KafkaClient` for the shared options; it connects on first use and is closed with
    the context. `extra_names`: properties the command reads itself (a producer's `acks`...), passed through."""
    from ..client import KafkaClient

    client = KafkaClient(client_config(ctx, extra_names), on_waiting=_say_waiting)
    ctx.call_on_close(client.close)
    return client


def _say_waiting(message: str) -> None:
    """The one line a command prints while it waits for a broker that is not listening yet."""
    from .errors import visible

    click.echo(f"compatbroker: {visible(message)}", err=True)


def make_admin(ctx: click.Context):
    """A `compatbroker.client.admin.Admin` over `make_client(ctx)`."""
    from ..client.admin import Admin

    return Admin(make_client(ctx))


def client_config(ctx: click.Context, extra_names=()):
    """The `compatbroker.client.ClientConfig` of the shared options (a bad property is a usage error, exit 2)."""
    from ..client import ClientConfig
    from ..client.errors import ClientConfigError

    chosen = settings(ctx)
    properties = read_properties(chosen.command_config) if chosen.command_config else {}
    properties.update(chosen.properties)
    try:
        return ClientConfig(bootstrap=chosen.bootstrap, client_id=chosen.client_id, properties=properties,
                            extra_names=extra_names)
    except (ClientConfigError, ValueError) as exc:
        where = "--command-config/-X" if properties else "--bootstrap-server"
        raise CliError(where, None, str(exc), EXIT_USAGE) from None


def read_properties(path: str) -> dict[str, str]:
    """A Java properties file, read as the broker reads server.properties (`compatbroker.config`)."""
    from ..config import parse_properties

    try:
        with open(path, encoding="utf-8") as file:
            return parse_properties(file.read())
    except OSError as exc:
        raise CliError("--command-config", None, f"cannot read {path}: {exc.strerror}", EXIT_USAGE) from None


def parse_key_value(text: str, option: str) -> tuple[str, str]:
    """`key=value` of -X / --config / --set options (a usage error otherwise)."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise click.BadParameter(f"expected key=value, got {text!r}", param_hint=option)
    return key.strip(), value


# --- the decorator ----------------------------------------------------------------------------------------------

def _store(attribute: str):
    def callback(ctx: click.Context, param: click.Parameter, value):
        if value is None or value == ():
            return
        given = ctx.ensure_object(CliSettings)
        if attribute == "properties":
            for item in value:
                key, text = parse_key_value(item, "-X")
                given.properties[key] = text
        else:
            setattr(given, attribute, value)
    return callback


def format_option(command):
    """--format table|json, stored in ctx.obj as the shared client options are (output_format reads it)."""
    return click.option("--format", "output_format", type=click.Choice(FORMATS), expose_value=False,
                        callback=_store("format"), help="table for people (default), json for scripts")(command)


def client_options(command):
    """Add the shared client options to a click command or group (they are stored in ctx.obj, not passed)."""
    options = [
        click.option("-b", "--bootstrap-server", metavar="HOST:PORT", expose_value=False,
                     callback=_store("bootstrap"),
                     help=f"a broker to bootstrap from (default {DEFAULT_BOOTSTRAP}, or ${BOOTSTRAP_ENV})"),
        click.option("--command-config", metavar="FILE", expose_value=False, callback=_store("command_config"),
                     type=click.Path(dir_okay=False),
                     help="client properties in Java properties format (security.protocol, sasl.mechanism, "
                          "sasl.jaas.config, ssl.truststore.location...)"),
        click.option("-X", "properties", metavar="KEY=VALUE", multiple=True, expose_value=False,
                     callback=_store("properties"), help="one client property (repeatable)"),
        click.option("--client-id", metavar="ID", expose_value=False, callback=_store("client_id"),
                     help=f"the client.id the broker sees (default {DEFAULT_CLIENT_ID})"),
        format_option,
    ]
    for option in reversed(options):
        command = option(command)
    return command

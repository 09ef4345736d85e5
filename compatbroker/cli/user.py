"""`compatbroker user list|create|delete`: SCRAM credentials of any Kafka cluster (DescribeUserScramCredentials,
AlterUserScramCredentials), as `kafka-configs.sh --entity-type users --alter --add-config 'SCRAM-SHA-256=[...]'`
manages them. The password is given with --password or on stdin (one line; asked for, hidden, on a terminal);
the client salts and hashes it, the broker never sees it.

`--format json` documents (stable keys):
- list: `{"users": [{"name", "credentials": [{"mechanism", "iterations"}]}]}`
- create / delete: `{"users": [{"name", "mechanism", "iterations", "error"}]}` (iterations null for delete)
"""
from __future__ import annotations

import sys

import click

from .errors import EXIT_CODES_HELP, Failures, error_json, kafka_errors
from .options import client_options, make_admin
from .output import Message, Table, emit

MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
DEFAULT_ITERATIONS = 4096   # kafka-configs.sh's default
MIN_ITERATIONS = 4096       # Kafka's ScramMechanism minimum


@click.group("user", epilog=EXIT_CODES_HELP)
def user():
    """SCRAM users: list, create (or change the password), delete."""


def _mechanisms(given) -> list[str]:
    return [m.upper() for m in given] or list(MECHANISMS)


mechanism_option = click.option(
    "--mechanism", "mechanisms", type=click.Choice(MECHANISMS, case_sensitive=False), multiple=True,
    metavar="MECHANISM",
    help="SCRAM-SHA-256 or SCRAM-SHA-512 (repeatable; default both)")


@user.command("list", epilog=EXIT_CODES_HELP)
@click.argument("names", metavar="[NAME]...", nargs=-1)
@client_options
@click.pass_context
def list_users(ctx, names):
    """List users with SCRAM credentials (all, or those named) and their mechanisms and iterations."""
    admin = make_admin(ctx)
    with kafka_errors("user list"):
        described = admin.describe_scram_users(list(names) or None)
    users, failures = [], Failures()
    for entry in described:
        if entry.error is not None:
            failures.add(f"user list {entry.user}", entry.error)
            continue
        users.append({"name": entry.user, "credentials": [
            {"mechanism": c.mechanism, "iterations": c.iterations} for c in entry.credentials]})
    users.sort(key=lambda u: u["name"])
    rows = [{"name": u["name"], "mechanism": c["mechanism"], "iterations": c["iterations"]}
            for u in users for c in u["credentials"]]
    emit(ctx, {"users": users}, Table([("name", "USER"), ("mechanism", "MECHANISM"), ("iterations", "ITERATIONS")],
                                      rows))
    return failures.exit_code


def _password(given: str | None) -> str:
    if given is not None:
        return given
    if sys.stdin.isatty():
        return click.prompt("Password", hide_input=True, confirmation_prompt=True, err=True)
    line = sys.stdin.readline()
    password = line[:-1] if line.endswith("\n") else line
    if not password:
        raise click.UsageError("give the password with --password or as one line on stdin")
    return password


@user.command("create", epilog=EXIT_CODES_HELP)
@click.argument("name")
@mechanism_option
@click.option("--iterations", type=click.IntRange(min=MIN_ITERATIONS), default=DEFAULT_ITERATIONS,
              help=f"PBKDF2 iterations (default {DEFAULT_ITERATIONS}; Kafka accepts {MIN_ITERATIONS} to 16384)")
@click.option("--password", metavar="PASSWORD", help="the password (default: one line read from stdin)")
@client_options
@click.pass_context
def create(ctx, name, mechanisms, iterations, password):
    """Create user NAME's SCRAM credentials, or replace them (a new password)."""
    from ..client.admin import ScramUpsertion

    secret = _password(password)
    chosen = _mechanisms(mechanisms)
    admin = make_admin(ctx)
    with kafka_errors(f"user create {name}"):
        results = admin.alter_scram_users(
            upsertions=[ScramUpsertion(name, mechanism, secret, iterations) for mechanism in chosen])
    return _report(ctx, "create", name, chosen, iterations, results)


@user.command("delete", epilog=EXIT_CODES_HELP)
@click.argument("name")
@mechanism_option
@client_options
@click.pass_context
def delete(ctx, name, mechanisms):
    """Delete user NAME's SCRAM credentials (every mechanism it has, or those given)."""
    admin = make_admin(ctx)
    with kafka_errors(f"user delete {name}"):
        if mechanisms:
            chosen = _mechanisms(mechanisms)
        else:
            described = admin.describe_scram_users([name])
            chosen = [c.mechanism for entry in described if entry.error is None for c in entry.credentials]
            if not chosen:  # let the broker say how it refuses an unknown user
                chosen = list(MECHANISMS[:1])
        results = admin.alter_scram_users(deletions=[(name, mechanism) for mechanism in chosen])
    return _report(ctx, "delete", name, chosen, None, results)


def _report(ctx, verb: str, name: str, mechanisms: list[str], iterations, results) -> int:
    error, failures = _error_of(results, name), Failures()
    rows = [{"name": name, "mechanism": mechanism, "iterations": iterations, "error": error_json(error)}
            for mechanism in mechanisms]
    if error is not None:
        failures.add(f"user {verb} {name}", error)
    done = "Created" if verb == "create" else "Deleted"
    emit(ctx, {"users": rows},
         *([] if error else [Message(f"{done} {', '.join(mechanisms)} credentials of user {name}.")]))
    return failures.exit_code


def _error_of(results, name: str):
    return next((result.error for result in results if result.user == name and result.error is not None), None)

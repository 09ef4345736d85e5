"""`compatbroker acl list|create|delete`: ACL bindings of any Kafka cluster (DescribeAcls, CreateAcls, DeleteAcls),
with kafka-acls.sh's option names and vocabulary: a resource (`--topic`, `--group`, `--cluster`,
`--transactional-id`, `--delegation-token`, `--user-principal`) and its `--resource-pattern-type`, principals
(`--allow-principal` / `--deny-principal`, `User:alice`), hosts, `--operation`s (Read, Write, IdempotentWrite...).
`create` adds every combination of the principals, hosts and operations given, as kafka-acls.sh --add does.

`--format json` documents (stable keys), each binding as `{"resource_type", "resource_name", "pattern_type",
"principal", "host", "operation", "permission"}` in Kafka's names (TOPIC, LITERAL, READ, ALLOW):
- list: `{"acls": [binding]}`
- create: `{"acls": [binding + "error"]}`
- delete: `{"acls": [binding]}` (those deleted), errors on stderr
"""
from __future__ import annotations

import re

import click

from ..client.admin import ACL_OPERATIONS, ACL_PATTERN_TYPES, ACL_PERMISSIONS
from .errors import EXIT_CODES_HELP, Failures, error_json, kafka_errors
from .options import client_options, make_admin
from .output import Table, emit

CLUSTER_NAME = "kafka-cluster"   # the one CLUSTER resource's name
WILDCARD = "*"
COLUMNS = [("resource_type", "RESOURCE-TYPE"), ("resource_name", "RESOURCE-NAME"), ("pattern_type", "PATTERN-TYPE"),
           ("principal", "PRINCIPAL"), ("host", "HOST"), ("operation", "OPERATION"),
           ("permission", "PERMISSION")]


@click.group("acl", epilog=EXIT_CODES_HELP)
def acl():
    """List, create and delete ACL bindings (as kafka-acls.sh)."""


def _enum_value(names: tuple[str, ...], text: str, option: str, allowed=None) -> str:
    """Kafka's name of an ACL enum value from any of its spellings: Read, READ, IdempotentWrite, idempotent-write."""
    key = re.sub(r"(?<=[a-z])(?=[A-Z])", "_", text.strip()).replace("-", "_").upper()
    choices = [name for name in names if name != "UNKNOWN" and (allowed is None or name in allowed)]
    if key not in choices:
        raise click.BadParameter(f"{text!r} is not one of {', '.join(choices)}", param_hint=option)
    return key


def resource_options(command):
    """kafka-acls.sh's resource selectors (one of them)."""
    options = [
        click.option("--topic", help="a topic (or * for every topic)"),
        click.option("--group", help="a consumer group (or *)"),
        click.option("--cluster", is_flag=True, help="the cluster"),
        click.option("--transactional-id", help="a transactional id (or *)"),
        click.option("--delegation-token", help="a delegation token id (or *)"),
        click.option("--user-principal", help="a user principal, for CreateTokens/DescribeTokens ACLs"),
        click.option("--resource-pattern-type", metavar="TYPE",
                     help="LITERAL (default for create) or PREFIXED; in list/delete filters also ANY (their "
                          "default) and MATCH"),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _resource(params: dict, *, required: bool) -> tuple[str, str | None]:
    given = [("TOPIC", params["topic"]), ("GROUP", params["group"]),
             ("CLUSTER", CLUSTER_NAME if params["cluster"] else None),
             ("TRANSACTIONAL_ID", params["transactional_id"]), ("DELEGATION_TOKEN", params["delegation_token"]),
             ("USER", params["user_principal"])]
    given = [(kind, name) for kind, name in given if name is not None]
    if len(given) > 1:
        raise click.UsageError("give one resource: --topic, --group, --cluster, --transactional-id, "
                               "--delegation-token or --user-principal")
    if not given:
        if required:
            raise click.UsageError("give the resource: --topic, --group, --cluster, --transactional-id, "
                                   "--delegation-token or --user-principal")
        return "ANY", None
    return given[0]


def _pattern(params: dict, default: str, *, filtering: bool) -> str:
    text = params["resource_pattern_type"]
    allowed = None if filtering else ("LITERAL", "PREFIXED")
    return default if text is None else _enum_value(ACL_PATTERN_TYPES, text, "--resource-pattern-type", allowed)


def binding_json(binding) -> dict:
    """A binding (compatbroker.client.admin.AclBinding) as the CLI shows it."""
    return {"resource_type": binding.resource_type, "resource_name": binding.resource_name,
            "pattern_type": binding.pattern_type, "principal": binding.principal, "host": binding.host,
            "operation": binding.operation, "permission": binding.permission}


def _filter_options(command):
    options = [
        click.option("--principal", help="only bindings of this principal, e.g. User:alice"),
        click.option("--host", help="only bindings of this host"),
        click.option("--operation", help="only bindings of this operation (Read, Write, All, ...)"),
        click.option("--permission", help="only ALLOW or DENY bindings"),
    ]
    for option in reversed(options):
        command = option(command)
    return resource_options(command)


def _binding_filter(params: dict, *, resource_required: bool):
    from ..client.admin import AclFilter

    resource_type, name = _resource(params, required=resource_required)
    return AclFilter(
        resource_type=resource_type, resource_name=name, pattern_type=_pattern(params, "ANY", filtering=True),
        principal=params["principal"], host=params["host"],
        operation="ANY" if params["operation"] is None
        else _enum_value(ACL_OPERATIONS, params["operation"], "--operation"),
        permission="ANY" if params["permission"] is None
        else _enum_value(ACL_PERMISSIONS, params["permission"], "--permission"))


@acl.command("list", epilog=EXIT_CODES_HELP)
@_filter_options
@client_options
@click.pass_context
def list_acls(ctx, **params):
    """List the ACL bindings matching a filter (every binding without one)."""
    acl_filter = _binding_filter(params, resource_required=False)
    admin = make_admin(ctx)
    with kafka_errors("acl list"):
        found = admin.describe_acls(acl_filter)
    rows = sorted((binding_json(binding) for binding in found), key=_order)
    emit(ctx, {"acls": rows}, Table(COLUMNS, rows))


def _order(row: dict):
    return tuple(str(row[key]) for key, _ in COLUMNS)


@acl.command("create", epilog=EXIT_CODES_HELP)
@resource_options
@click.option("--allow-principal", "allow_principals", metavar="PRINCIPAL", multiple=True,
              help="a principal to allow, e.g. User:alice or User:* (repeatable)")
@click.option("--deny-principal", "deny_principals", metavar="PRINCIPAL", multiple=True,
              help="a principal to deny (repeatable)")
@click.option("--allow-host", "allow_hosts", metavar="HOST", multiple=True,
              help="a host the allowed principals may connect from (repeatable; default *)")
@click.option("--deny-host", "deny_hosts", metavar="HOST", multiple=True,
              help="a host the denied principals are denied from (repeatable; default *)")
@click.option("--operation", "operations", metavar="OPERATION", multiple=True,
              help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, "
                   "IdempotentWrite, CreateTokens, DescribeTokens, All (repeatable; default All)")
@client_options
@click.pass_context
def create(ctx, allow_principals, deny_principals, allow_hosts, deny_hosts, operations, **params):
    """Create ACL bindings for one resource: every principal x host x operation given (CreateAcls)."""
    from ..client.admin import AclBinding

    if not allow_principals and not deny_principals:
        raise click.UsageError("give --allow-principal or --deny-principal")
    resource_type, name = _resource(params, required=True)
    pattern = _pattern(params, "LITERAL", filtering=False)
    chosen = [_enum_value(ACL_OPERATIONS, text, "--operation") for text in operations] or ["ALL"]
    bindings = []
    for permission, principals, hosts in (("ALLOW", allow_principals, allow_hosts),
                                          ("DENY", deny_principals, deny_hosts)):
        for principal in principals:
            for host in hosts or (WILDCARD,):
                for operation in chosen:
                    bindings.append(AclBinding(resource_type=resource_type, resource_name=name, pattern_type=pattern,
                                               principal=principal, host=host, operation=operation,
                                               permission=permission))
    admin = make_admin(ctx)
    with kafka_errors("acl create"):
        results = admin.create_acls(bindings)
    rows, failures = [], Failures()
    for result in results:
        row, error = binding_json(result.binding), result.error
        if error is not None:
            failures.add(f"acl create {row['resource_type']}:{row['resource_name']} {row['principal']} "
                         f"{row['operation']}", error)
        rows.append({**row, "error": error_json(error)})
    emit(ctx, {"acls": rows}, Table(COLUMNS, [row for row in rows if row["error"] is None], title="Created"))
    return failures.exit_code


@acl.command("delete", epilog=EXIT_CODES_HELP)
@_filter_options
@client_options
@click.pass_context
def delete(ctx, **params):
    """Delete the ACL bindings of a resource matching a filter (DeleteAcls)."""
    acl_filter = _binding_filter(params, resource_required=True)
    admin = make_admin(ctx)
    with kafka_errors("acl delete"):
        results = admin.delete_acls([acl_filter])
    rows, failures = [], Failures()
    for result in results:
        if result.error is not None:
            failures.add("acl delete", result.error)
            continue
        for deleted in result.deleted:
            if deleted.error is not None:
                failures.add("acl delete", deleted.error)
            else:
                rows.append(binding_json(deleted.binding))
    rows.sort(key=_order)
    emit(ctx, {"acls": rows}, Table(COLUMNS, rows, title="Deleted"))
    return failures.exit_code

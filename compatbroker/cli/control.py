"""`compatbroker control --control HOST:PORT COMMAND ...`: one command to the control endpoint of a running broker
(one started with `--control-listen`, `compatbroker.toolkit.control`), its answer printed as JSON.

Exit 0 with the answer, 1 when the endpoint refuses or cannot be reached, 2 without an endpoint.
"""
from __future__ import annotations

import json
import os
import sys

import click

EXIT_BAD_CONFIG = 2
EXIT_CONTROL_FAILED = 1
CONTROL_ENV = "COMPATBROKER_CONTROL"


class _Count(click.ParamType):
    """A number of times: at least 1, or 'all' (None: until cleared)."""
    name = "count"

    def convert(self, value, param, ctx):
        if value is None or isinstance(value, int):
            return value
        if value.lower() in ("all", "none", "unlimited"):
            return None
        try:
            number = int(value)
        except ValueError:
            self.fail(f"{value!r} is not a number or 'all'", param, ctx)
        if number < 1:
            self.fail("must be at least 1, or 'all'", param, ctx)
        return number


COUNT = _Count()


@click.group("control", short_help="drive a running broker's control API",
             help="Send one command to the control endpoint of a broker started with --control-listen and print "
                  "the answer as JSON.")
@click.option("--control", "endpoint", metavar="HOST:PORT",
              help=f"the control endpoint (default ${CONTROL_ENV})")
@click.pass_context
def control(ctx, endpoint):
    ctx.obj = endpoint if endpoint is not None else os.environ.get(CONTROL_ENV)


def _command(name: str, help_text: str, *params):
    """A control command sending its arguments to the endpoint (`_call`)."""
    def run(**args):
        return _run(click.get_current_context().obj, name, args)
    for param in reversed(params):
        run = param(run)
    control.add_command(click.command(name, help=help_text, short_help=help_text)(run))


def _run(endpoint: str | None, command: str, args: dict) -> int:
    from ..toolkit.control import ControlError
    from ..toolkit.control.client import ControlClient

    if not endpoint:
        print(f"compatbroker control: give the endpoint with --control HOST:PORT (or ${CONTROL_ENV})",
              file=sys.stderr)
        return EXIT_BAD_CONFIG
    client = ControlClient(endpoint)
    try:
        answer = _call(client, command, args)
    except ControlError as exc:
        print(f"compatbroker control: {exc.message}", file=sys.stderr)
        return EXIT_CONTROL_FAILED
    print(json.dumps(answer, indent=2, default=_json_default(args.get("text", False))))
    return 0


def _call(client, command: str, args: dict):
    if command == "inject-error":
        return client.inject_error(args["api"], args["error"], args["count"], args["topic"])
    if command == "inject-latency":
        return client.inject_latency(None if args["api"].lower() == "all" else args["api"], args["ms"],
                                     args["count"])
    if command == "drop-connections":
        return client.drop_connections_after(args["after"], args["api"], args["count"])
    if command == "records":
        return client.records(args["topic"], args["partition"], args["offset"], args["limit"])
    if command == "offsets":
        return client.committed_offsets(args["group"])
    if command == "group":
        return client.describe_group(args["group"])
    if command == "transactions":
        return client.transactions(args["transactional_id"])
    if command == "requests":
        return client.clear_requests() if args["clear"] else client.requests(args["since"], args["api"])
    if command == "add-user":
        return client.add_user(args["name"], args["password"], list(args["mechanisms"]) or None, args["iterations"])
    if command == "remove-user":
        return client.remove_user(args["name"], list(args["mechanisms"]) or None)
    if command in ("acls", "add-acl", "remove-acls"):
        return _acl_call(client, command, args)
    if command in ("stop-node", "start-node"):
        return (client.stop_node if command == "stop-node" else client.start_node)(args["node_id"])
    if command == "isolate-node":
        return client.isolate_node(args["node_id"], not args["undo"])
    if command == "delay-follower":
        return client.delay_follower(args["node_id"], args["ms"])
    if command == "leader":
        return client.leader(args["topic"], args["partition"])
    if command == "move-leader":
        return client.move_leader(args["topic"], args["partition"], args["node_id"])
    simple = {"clear-faults": client.clear_faults, "faults": client.faults, "down": client.down, "up": client.up,
              "status": client.status, "topics": client.topics, "nodes": client.nodes,
              "restore-nodes": client.restore_nodes, "users": client.users, "groups": client.groups}
    return simple[command]()


def _acl_call(client, command: str, args: dict):
    fields = {key: args[key] for key in ("resource_type", "name", "pattern_type", "principal", "host", "operation",
                                         "permission")}
    if command == "add-acl":
        return client.add_acls([{key: value for key, value in fields.items() if value is not None}])
    return (client.acls if command == "acls" else client.remove_acls)(**fields)


def _json_default(text: bool):
    """Bytes of records as the user asked: base64 (as the HTTP API gives them) or text."""
    import base64

    def convert(value):
        if isinstance(value, (bytes, bytearray)):
            if text:
                return bytes(value).decode("utf-8", "replace")
            return base64.b64encode(bytes(value)).decode("ascii")
        raise TypeError(f"cannot show {type(value).__name__} as JSON")

    return convert


# --- the commands, as `compatbroker control COMMAND --help` lists them -----------------------------------------

arg, opt = click.argument, click.option

_command("inject-error", "answer the next requests of an API with an error",
         arg("api"), arg("error"),
         opt("--count", type=COUNT, default="1", help="how many requests (default 1; 'all': until cleared)"),
         opt("--topic", help="only requests that name this topic"))
_command("inject-latency", "delay requests of an API (or of every API)",
         arg("api"), arg("ms", type=float),
         opt("--count", type=COUNT, default=None, help="how many requests (default: until cleared)"))
_command("drop-connections", "close a client's connection instead of answering",
         opt("--after", type=int, default=0, help="serve this many requests first (default 0)"),
         opt("--api", help="count and drop only requests of this API"),
         opt("--count", type=COUNT, default="1", help="how many drops (default 1; 'all': until cleared)"))
_command("clear-faults", "remove every fault rule")
_command("faults", "show the fault rules in force")
_command("down", "close the listeners and cut every client connection")
_command("up", "listen again on the same ports")
_command("status", "up or down, bootstrap servers, cluster id")
_command("topics", "list the topics")
_command("nodes", "the cluster's nodes: address, rack, up, alive, isolated, leaders")
_command("stop-node", "stop a node: its leaders fail over, its listener closes", arg("node_id", type=int))
_command("start-node", "start a stopped node again on the same port", arg("node_id", type=int))
_command("isolate-node", "cut a node off from replication (it falls out of the ISRs)",
         arg("node_id", type=int), opt("--undo", is_flag=True, help="let it replicate again"))
_command("delay-follower", "make a node copy from its leaders late",
         arg("node_id", type=int), arg("ms", type=float))
_command("restore-nodes", "undo every node fault (stopped, isolated, delayed, down)")
_command("leader", "show a partition's leader, leader epoch, replicas and ISR",
         arg("topic"), arg("partition", type=int, required=False, default=0))
_command("move-leader", "make a node of the partition's ISR its leader",
         arg("topic"), arg("partition", type=int), arg("node_id", type=int))
_command("add-user", "store a user's SCRAM credentials",
         arg("name"), arg("password"),
         opt("--mechanism", "mechanisms", multiple=True,
             help="SCRAM-SHA-256 or SCRAM-SHA-512 (repeatable; default both)"),
         opt("--iterations", type=int, default=4096, help="PBKDF2 iterations (default 4096)"))
_command("remove-user", "delete a user's SCRAM credentials",
         arg("name"), opt("--mechanism", "mechanisms", multiple=True, help="only this one (repeatable)"))
_command("users", "show the users with SCRAM credentials")


def _acl_options(required: bool) -> list:
    """A binding names its resource, principal and operation; a filter need not."""
    return [opt("--resource-type", required=required, help="TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, ..."),
            opt("--name", required=required, help="the resource name (kafka-cluster for CLUSTER)"),
            opt("--pattern-type", help="LITERAL (default for add-acl), PREFIXED; in filters also MATCH"),
            opt("--principal", required=required, help="e.g. User:alice"),
            opt("--host", help="a client IP address, or * (default for add-acl)"),
            opt("--operation", required=required, help="READ, WRITE, DESCRIBE, ALL, ..."),
            opt("--permission", help="ALLOW (default for add-acl) or DENY")]


_command("acls", "show the ACL bindings matching a filter", *_acl_options(False))
_command("add-acl", "add an ACL binding", *_acl_options(True))
_command("remove-acls", "remove the ACL bindings matching a filter", *_acl_options(False))
_command("records", "show the records stored in a partition",
         arg("topic"), arg("partition", type=int, required=False, default=0),
         opt("--offset", type=int, help="first offset (default: the log start)"),
         opt("--limit", type=int, default=1000, help="at most this many records (default 1000)"),
         opt("--text", is_flag=True, help="show keys, values and header values as UTF-8 text instead of base64"))
_command("offsets", "show a group's committed offsets (a share group's start offsets)", arg("group"))
_command("groups", "show every group: type (classic, consumer, share), state, protocol type")
_command("group", "describe a group of any type: state, epoch, members, assignments", arg("group"))
_command("transactions", "show the transaction coordinator's transactional ids",
         arg("transactional_id", required=False))
_command("requests", "show the log of requests received",
         opt("--since", type=int, default=0, help="only entries numbered above this"),
         opt("--api", help="only requests of this API"),
         opt("--clear", is_flag=True, help="empty the log instead"))

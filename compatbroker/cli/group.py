"""`compatbroker group list|describe|seek|delete`: consumer groups of any Kafka cluster, as kafka-consumer-groups.sh
shows and changes them (ListGroups, DescribeGroups / ConsumerGroupDescribe / ShareGroupDescribe, OffsetFetch,
ListOffsets, OffsetCommit, DescribeShareGroupOffsets, AlterShareGroupOffsets, DeleteGroups, OffsetDelete).

Lag per partition is the log end offset minus the committed offset (unknown, `null`, without a committed offset;
negative for an offset past the log end, as kafka-consumer-groups.sh shows it).
A share group (KIP-932) has no committed offsets: its share-partitions' start offsets stand in for them
(DescribeShareGroupOffsets), and its lag is the broker's count of records not yet delivered for good when the broker
reports it (v1), else the log end offset minus the start offset.
`seek` resets the committed offsets of an inactive group only (Empty or Dead), as kafka-consumer-groups.sh
--reset-offsets does: an active group's members own their offsets. A share group's start offsets are reset with
AlterShareGroupOffsets (as kafka-share-groups.sh --reset-offsets), an empty share group's only. A partition the
broker refuses keeps its offset: its row carries the error (and the command exits 1).

`--format json` documents (stable keys):
- list: `{"groups": [{"group_id", "type", "state", "protocol_type"}]}`
- describe: `{"groups": [{"group_id", "type", "state", "protocol_type", "protocol", "coordinator", "members":
  [{"member_id", "group_instance_id", "client_id", "host", "assignment": [{"topic", "partitions"}]}],
  "offsets": [{"topic", "partition", "committed_offset", "log_end_offset", "lag", "member_id", "client_id",
  "host"}], "total_lag"}]}`
- seek: `{"group_id", "dry_run", "offsets": [{"topic", "partition", "previous_offset", "new_offset", "error"}]}`
  (`error`: null when applied, else `{"code", "name", "message"}`)
- delete: `{"groups": [{"group_id", "deleted", "error"}]}`; with --topic: `{"group_id", "offsets": [{"topic",
  "partition", "deleted", "error"}]}`
"""
from __future__ import annotations

from collections import defaultdict

import click

from .errors import EXIT_CODES_HELP, CliError, Failures, error_json, kafka_errors
from .options import client_options, make_admin
from .output import Fields, Message, Table, emit

INACTIVE_STATES = ("empty", "dead")


@click.group("group", epilog=EXIT_CODES_HELP)
def group():
    """Consumer groups: list, describe with lag, reset offsets, delete."""


# --- list ---------------------------------------------------------------------------------------------------------

@group.command("list", epilog=EXIT_CODES_HELP)
@click.option("--state", "states", metavar="STATE", multiple=True,
              help="only groups in this state (Stable, Empty, ...; repeatable)")
@click.option("--type", "types", type=click.Choice(["classic", "consumer", "share"], case_sensitive=False),
              multiple=True, help="only groups of this type (repeatable)")
@client_options
@click.pass_context
def list_groups(ctx, states, types):
    """List the groups with their type, state and protocol type."""
    admin = make_admin(ctx)
    with kafka_errors("group list"):
        listed = admin.list_groups()  # filtered here: older brokers cannot filter states
    wanted_states = {state.lower() for state in states}
    wanted_types = {kind.lower() for kind in types}
    rows = []
    for entry in sorted(listed, key=lambda e: e.group_id):
        row = {"group_id": entry.group_id, "type": _lower(entry.type), "state": entry.state,
               "protocol_type": entry.protocol_type}
        if (not wanted_states or (row["state"] or "").lower() in wanted_states) and \
                (not wanted_types or row["type"] in wanted_types):
            rows.append(row)
    emit(ctx, {"groups": rows}, Table([("group_id", "GROUP"), ("type", "TYPE"), ("state", "STATE"),
                                       ("protocol_type", "PROTOCOL-TYPE")], rows))


def _lower(text):
    return text.lower() if isinstance(text, str) else text


# --- describe -----------------------------------------------------------------------------------------------------

@group.command("describe", epilog=EXIT_CODES_HELP)
@click.argument("group_ids", metavar="GROUP...", nargs=-1, required=True)
@client_options
@click.pass_context
def describe(ctx, group_ids):
    """Show groups' state, protocol, members with their assignments, and the lag of every partition (log end
    offset - committed offset), with totals. Exit 1 if a group does not exist (the others are still shown)."""
    group_ids = list(dict.fromkeys(group_ids))
    admin = make_admin(ctx)
    with kafka_errors("group describe"):
        descriptions = {d.group_id: d for d in admin.describe_groups(group_ids)}
    documents, views, failures = [], [], Failures()
    for group_id in group_ids:
        found = descriptions[group_id]
        if found.error is not None:
            failures.add(f"group describe {group_id}", found.error)
            continue
        with kafka_errors(f"group describe {group_id}"):
            document = _describe_group(admin, found)
        documents.append(document)
        views.extend(_group_views(document))
    emit(ctx, {"groups": documents}, *views)
    return failures.exit_code


def _describe_group(admin, found) -> dict:
    """The describe document of an existing group: members, and per partition its offsets and lag."""
    members = [_member_json(member) for member in found.members]
    if found.type == "share":
        committed, lags = _share_start_offsets(admin, found.group_id)
    else:
        committed, lags = _committed_map(admin.committed_offsets(found.group_id)), {}
    owners = {(a["topic"], p): member for member in members for a in member["assignment"] for p in a["partitions"]}
    partitions = sorted(set(committed) | set(owners))
    ends = end_offsets(admin, partitions)
    offsets = []
    for topic, partition in partitions:
        owner = owners.get((topic, partition), {})
        current, end = committed.get((topic, partition)), ends.get((topic, partition))
        lag = None if current is None or end is None else end - current
        offsets.append({"topic": topic, "partition": partition, "committed_offset": current,
                        "log_end_offset": end, "lag": lags.get((topic, partition), lag),
                        "member_id": owner.get("member_id"), "client_id": owner.get("client_id"),
                        "host": owner.get("host")})
    return {"group_id": found.group_id, "type": found.type, "state": found.state,
            "protocol_type": found.protocol_type or None, "protocol": found.protocol or found.assignor or None,
            "coordinator": found.coordinator, "members": members, "offsets": offsets,
            "total_lag": sum(row["lag"] for row in offsets if row["lag"] is not None)}


def _member_json(member) -> dict:
    assignment = defaultdict(list)
    for assigned in member.assignment or []:
        assignment[assigned.topic].append(assigned.partition)
    return {"member_id": member.member_id, "group_instance_id": member.instance_id, "client_id": member.client_id,
            "host": member.client_host,
            "assignment": [{"topic": topic, "partitions": sorted(parts)}
                           for topic, parts in sorted(assignment.items())]}


def _committed_map(committed) -> dict:
    """{(topic, partition): offset} of OffsetFetch results (partitions without a committed offset left out)."""
    return {(c.topic, c.partition): c.offset for c in committed if c.error is None and c.offset >= 0}


def _share_start_offsets(admin, group_id: str) -> tuple[dict, dict]:
    """A share group's start offsets {(topic, partition): offset} and, from brokers that report it (v1+), its lag
    {(topic, partition): records not yet delivered for good}."""
    starts, lags = {}, {}
    for found in admin.describe_share_group_offsets(group_id):
        if found.error is None and found.start_offset >= 0:
            starts[(found.topic, found.partition)] = found.start_offset
            if found.lag >= 0:
                lags[(found.topic, found.partition)] = found.lag
    return starts, lags


def end_offsets(admin, partitions, spec="latest") -> dict:
    """{(topic, partition): offset} by ListOffsets (one call per topic); a partition whose leader failed to answer
    is left out, one no record matches (a timestamp after the last) has -1."""
    by_topic = defaultdict(list)
    for topic, partition in partitions:
        by_topic[topic].append(partition)
    found = {}
    for topic, parts in by_topic.items():
        for result in admin.list_offsets(topic, sorted(parts), spec):
            if result.error is None:
                found[(topic, result.partition)] = result.offset
    return found


def _group_views(document: dict) -> list:
    summary = Fields({"Group": document["group_id"], "Type": document["type"], "State": document["state"],
                      "Protocol": document["protocol"], "Coordinator": document["coordinator"],
                      "Members": len(document["members"]), "Total lag": document["total_lag"]})
    offsets = Table([("topic", "TOPIC"), ("partition", "PARTITION"), ("committed_offset", "CURRENT-OFFSET"),
                     ("log_end_offset", "LOG-END-OFFSET"), ("lag", "LAG"), ("member_id", "CONSUMER-ID"),
                     ("host", "HOST"), ("client_id", "CLIENT-ID")], document["offsets"])
    members = Table([("member_id", "CONSUMER-ID"), ("group_instance_id", "GROUP-INSTANCE-ID"), ("host", "HOST"),
                     ("client_id", "CLIENT-ID"), ("assignment_text", "ASSIGNMENT")],
                    [{**m, "assignment_text": " ".join(f"{a['topic']}:{','.join(map(str, a['partitions']))}"
                                                       for a in m["assignment"])} for m in document["members"]])
    return [summary, offsets, members] if document["members"] else [summary, offsets]


# --- seek ---------------------------------------------------------------------------------------------------------

def _parse_topic(text: str) -> tuple[str, list[int] | None]:
    """`TOPIC` or `TOPIC:P,P,...` (kafka-consumer-groups.sh's --topic)."""
    topic, sep, parts = text.partition(":")
    if not topic:
        raise click.BadParameter(f"expected TOPIC or TOPIC:PARTITION,..., got {text!r}", param_hint="--topic")
    if not sep:
        return topic, None
    try:
        return topic, sorted({int(part) for part in parts.split(",")})
    except ValueError:
        raise click.BadParameter(f"invalid partitions in {text!r}", param_hint="--topic") from None


def _parse_target(text: str):
    """earliest | latest | OFFSET | @TIMESTAMP_MS."""
    lowered = text.lower()
    if lowered in ("earliest", "latest"):
        return lowered
    try:
        if text.startswith("@"):
            return ("timestamp", int(text[1:]))
        offset = int(text)
    except ValueError:
        offset = -1
    if offset < 0:
        raise click.BadParameter(f"expected earliest, latest, an offset or @TIMESTAMP_MS, got {text!r}",
                                 param_hint="--to")
    return ("offset", offset)


@group.command("seek", epilog=EXIT_CODES_HELP)
@click.argument("group_id", metavar="GROUP")
@click.option("--to", "target", required=True, metavar="earliest|latest|OFFSET|@TIMESTAMP_MS",
              help="the new committed offset: the log start, the log end, an offset (kept within the log), or the "
                   "first record at or after a timestamp in ms (the log end if none)")
@click.option("--topic", "topics", metavar="TOPIC[:P,P...]", multiple=True,
              help="the partitions to reset: every partition of TOPIC, or those listed (repeatable)")
@click.option("--all-topics", is_flag=True, help="every partition the group has committed offsets for")
@click.option("--dry-run", is_flag=True, help="show the new offsets without committing them")
@client_options
@click.pass_context
def seek(ctx, group_id, target, topics, all_topics, dry_run):
    """Reset the committed offsets of inactive group GROUP (no members: Empty or Dead), as
    kafka-consumer-groups.sh --reset-offsets does, or a share group's start offsets (AlterShareGroupOffsets, as
    kafka-share-groups.sh --reset-offsets). An active group is refused (exit 1); so is each partition the broker
    refuses (its row shows the error)."""
    spec = _parse_target(target)
    wanted = [_parse_topic(text) for text in topics]
    if bool(wanted) == all_topics:
        raise click.UsageError("give the partitions to reset: --topic TOPIC[:P,P...] (repeatable) or --all-topics")
    admin = make_admin(ctx)
    what = f"group seek {group_id}"
    failures = Failures()
    with kafka_errors(what):
        (found,) = admin.describe_groups([group_id])
        if found.error is not None and found.error.name != "GROUP_ID_NOT_FOUND":
            raise CliError(what, found.error.name, found.error.message)
        state = found.state if found.error is None else "Dead"   # no such group yet: offsets may be set
        share = found.error is None and found.type == "share"
        if state.lower() not in INACTIVE_STATES:
            raise CliError(what, "NON_EMPTY_GROUP", _not_inactive_message(group_id, state, share))
        previous = _share_start_offsets(admin, group_id)[0] if share else \
            _committed_map(admin.committed_offsets(group_id))
        partitions = sorted(previous) if all_topics else _partitions_of(admin.client, wanted)
        new = _target_offsets(admin, partitions, spec)
        errors = {}
        if not dry_run and new:
            commit = admin.alter_share_group_offsets if share else admin.commit_offsets
            errors = {(r.topic, r.partition): r.error for r in commit(group_id, new) if r.error is not None}
    for (topic, partition), error in sorted(errors.items()):
        failures.add(f"{what} {topic}:{partition}", error)
    rows = [{"topic": topic, "partition": partition, "previous_offset": previous.get((topic, partition)),
             "new_offset": new[(topic, partition)], "error": error_json(errors.get((topic, partition)))}
            for topic, partition in sorted(new)]
    emit(ctx, {"group_id": group_id, "dry_run": dry_run, "offsets": rows},
         Table([("topic", "TOPIC"), ("partition", "PARTITION"), ("previous_offset", "PREVIOUS-OFFSET"),
                ("new_offset", "NEW-OFFSET"), ("error", "ERROR")],
               [{**row, "error": row["error"]["name"] if row["error"] else None} for row in rows],
               title=f"Group {group_id}" + (" (dry run)" if dry_run else "")))
    return failures.exit_code


def _not_inactive_message(group_id: str, state: str, share: bool) -> str:
    """kafka-share-groups.sh's and kafka-consumer-groups.sh's refusals to reset the offsets of a group in use."""
    if share:
        return f"Share group '{group_id}' is not empty."
    return f"Assignments can only be reset if the group '{group_id}' is inactive, but the current state is {state}."


def _partitions_of(client, wanted) -> list[tuple[str, int]]:
    partitions = []
    for topic, listed in wanted:
        known = client.topic(topic)
        for partition in listed if listed is not None else sorted(known.partitions):
            if partition not in known.partitions:
                raise CliError(f"group seek --topic {topic}:{partition}", "UNKNOWN_TOPIC_OR_PARTITION",
                               f"topic {topic} has no partition {partition}")
            partitions.append((topic, partition))
    return partitions


def _target_offsets(admin, partitions, spec) -> dict:
    if spec in ("earliest", "latest"):
        return end_offsets(admin, partitions, spec)
    kind, value = spec
    if kind == "timestamp":
        found = end_offsets(admin, partitions, value)
        missing = [tp for tp in partitions if found.get(tp, -1) < 0]  # no record at or after it: the log end
        found.update(end_offsets(admin, missing, "latest"))
        return found
    starts, ends = end_offsets(admin, partitions, "earliest"), end_offsets(admin, partitions, "latest")
    return {tp: min(max(value, starts.get(tp, value)), ends.get(tp, value)) for tp in partitions}


# --- delete -------------------------------------------------------------------------------------------------------

@group.command("delete", epilog=EXIT_CODES_HELP)
@click.argument("group_ids", metavar="GROUP...", nargs=-1, required=True)
@click.option("--topic", "topics", metavar="TOPIC[:P,P...]", multiple=True,
              help="delete only the group's committed offsets of this topic (or these partitions) instead of the "
                   "group (repeatable; one GROUP)")
@client_options
@click.pass_context
def delete(ctx, group_ids, topics):
    """Delete groups (DeleteGroups; they must have no members), or with --topic a group's committed offsets of
    some topics (OffsetDelete). Exit 1 if any item failed."""
    admin = make_admin(ctx)
    if topics:
        if len(group_ids) != 1:
            raise click.UsageError("--topic deletes the offsets of one group at a time")
        return _delete_offsets(ctx, admin, group_ids[0], [_parse_topic(text) for text in topics])
    group_ids = list(dict.fromkeys(group_ids))
    with kafka_errors("group delete"):
        results = admin.delete_groups(group_ids)
    errors = {result.group_id: result.error for result in results}
    rows, failures = [], Failures()
    for group_id in group_ids:
        error = errors.get(group_id)
        if error is not None:
            failures.add(f"group delete {group_id}", error)
        rows.append({"group_id": group_id, "deleted": error is None, "error": error_json(error)})
    emit(ctx, {"groups": rows}, *(Message(f"Deleted group {row['group_id']}.") for row in rows if row["deleted"]))
    return failures.exit_code


def _delete_offsets(ctx, admin, group_id: str, wanted) -> int:
    what = f"group delete {group_id}"
    with kafka_errors(what):
        partitions = _partitions_of(admin.client, wanted)
        results = admin.delete_offsets(group_id, partitions)
    errors = {(result.topic, result.partition): result.error for result in results}
    rows, failures = [], Failures()
    for topic, partition in partitions:
        error = errors.get((topic, partition))
        if error is not None:
            failures.add(f"{what} {topic}:{partition}", error)
        rows.append({"topic": topic, "partition": partition, "deleted": error is None, "error": error_json(error)})
    emit(ctx, {"group_id": group_id, "offsets": rows},
         Table([("topic", "TOPIC"), ("partition", "PARTITION"), ("deleted", "DELETED"), ("error", "ERROR")],
               [{**row, "error": row["error"]["name"] if row["error"] else None} for row in rows]))
    return failures.exit_code

"""`compatbroker topic list|create|describe|delete|alter-config`: topics of any Kafka cluster, as kafka-topics.sh
and kafka-configs.sh manage them (CreateTopics, DeleteTopics, Metadata, ListOffsets, DescribeConfigs,
IncrementalAlterConfigs).

`--format json` documents (stable keys):
- list: `{"topics": [{"name", "topic_id", "internal", "partitions", "replication_factor"}]}`
- create: `{"name", "created", "topic_id", "partitions", "replication_factor", "configs", "error"}`
- describe: `{"topics": [{"name", "topic_id", "internal", "partitions": [{"partition", "leader", "leader_epoch",
  "replicas", "isr", "offline", "log_start_offset", "log_end_offset"}], "configs": [{"name", "value", "source",
  "read_only", "sensitive"}]}]}` (configs: those not at their default, as kafka-topics --describe shows them)
- delete: `{"topics": [{"name", "deleted", "error"}]}`
- alter-config: `{"name", "set": {k: v}, "deleted": [k], "error"}`
"""
from __future__ import annotations

import click

from .errors import EXIT_CODES_HELP, CliError, Failures, error_json, kafka_errors
from .options import client_options, make_admin, parse_key_value
from .output import Fields, Message, Table, emit

TOPIC_RESOURCE = "TOPIC"
SET, DELETE = "SET", "DELETE"   # IncrementalAlterConfigs operations
DEFAULT_CONFIG_SOURCE = "DEFAULT_CONFIG"


@click.group("topic", epilog=EXIT_CODES_HELP)
def topic():
    """List, create, describe and delete topics, and alter their configs."""


def _key_values(items, option: str) -> dict[str, str]:
    return dict(parse_key_value(item, option) for item in items)


# --- list ---------------------------------------------------------------------------------------------------------

@topic.command("list", epilog=EXIT_CODES_HELP)
@click.option("--internal", is_flag=True, help="also list internal topics (__consumer_offsets, ...)")
@client_options
@click.pass_context
def list_topics(ctx, internal):
    """List the topics with their partition count and replication factor."""
    admin = make_admin(ctx)
    with kafka_errors("topic list"):
        listed = admin.list_topics(internal=internal)
    rows = [{"name": t.name, "topic_id": t.topic_id, "internal": t.internal, "partitions": t.partitions,
             "replication_factor": t.replication_factor} for t in listed]
    emit(ctx, {"topics": rows},
         Table([("name", "NAME"), ("partitions", "PARTITIONS"), ("replication_factor", "REPLICAS"),
                ("internal", "INTERNAL"), ("topic_id", "TOPIC-ID")], rows))


# --- create -------------------------------------------------------------------------------------------------------

@topic.command("create", epilog=EXIT_CODES_HELP)
@click.argument("name")
@click.option("-p", "--partitions", type=click.IntRange(min=1), default=None,
              help="number of partitions (default: the broker's num.partitions)")
@click.option("-r", "--replication-factor", type=click.IntRange(min=1), default=None,
              help="replicas of each partition (default: the broker's default.replication.factor)")
@click.option("-c", "--config", "configs", metavar="KEY=VALUE", multiple=True,
              help="a topic config, e.g. -c cleanup.policy=compact (repeatable)")
@click.option("--if-not-exists", is_flag=True, help="succeed (exit 0) when the topic already exists")
@click.option("--validate-only", is_flag=True, help="only check that the broker would create it")
@client_options
@click.pass_context
def create(ctx, name, partitions, replication_factor, configs, if_not_exists, validate_only):
    """Create topic NAME (CreateTopics). Exit 1 if it exists, unless --if-not-exists."""
    configs = _key_values(configs, "--config")
    from ..client.admin import NewTopic

    admin = make_admin(ctx)
    new = NewTopic(name, partitions if partitions is not None else -1,
                   replication_factor if replication_factor is not None else -1, configs)
    with kafka_errors(f"topic create {name}"):
        outcome = _single(admin.create_topics([new], validate_only=validate_only), name)
    error = outcome.error
    exists = error is not None and error.name == "TOPIC_ALREADY_EXISTS"
    document = {"name": name, "created": error is None and not validate_only, "topic_id": outcome.topic_id,
                "partitions": outcome.partitions if outcome.partitions >= 0 else partitions,
                "replication_factor": outcome.replication_factor if outcome.replication_factor >= 0
                else replication_factor, "configs": configs, "error": error_json(error)}
    if error is not None and not (exists and if_not_exists):
        raise CliError(f"topic create {name}", error.name, error.message)
    if exists:
        text = f"Topic {name} already exists."
    elif validate_only:
        text = f"Topic {name} would be created."
    else:
        text = f"Created topic {name}."
    emit(ctx, document, Message(text))


def _single(results, name):
    """The result of topic `name` among per-topic results."""
    return next(result for result in results if result.name == name)


# --- describe -----------------------------------------------------------------------------------------------------

@topic.command("describe", epilog=EXIT_CODES_HELP)
@click.argument("names", metavar="NAME...", nargs=-1, required=True)
@click.option("--all-configs", is_flag=True, help="show every config, defaults included")
@client_options
@click.pass_context
def describe(ctx, names, all_configs):
    """Show topics' partitions (leader, replicas, ISR, log start and end offsets) and their configs that are not
    defaults. Exit 1 if a topic does not exist (the others are still shown)."""
    from ..client.errors import KafkaError
    from ..protocol.error_codes import ErrorCode

    names = list(dict.fromkeys(names))
    admin = make_admin(ctx)
    with kafka_errors("topic describe"):
        metadata = admin.client.metadata(names)
    described, views, failures = [], [], Failures()
    for name in names:
        found = metadata.topics.get(name)
        if found is None or found.error is not None:
            failures.add(f"topic describe {name}", KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                         if found is None else found.error)
            continue
        with kafka_errors(f"topic describe {name}"):
            document = _describe_topic(admin, found, all_configs)
        described.append(document)
        views.extend(_topic_views(document))
    emit(ctx, {"topics": described}, *views)
    return failures.exit_code


def _describe_topic(admin, found, all_configs: bool) -> dict:
    partitions = sorted(found.partitions)
    starts = admin.list_offsets(found.name, partitions, "earliest")
    ends = admin.list_offsets(found.name, partitions, "latest")
    rows = []
    for index in partitions:
        state = found.partitions[index]
        rows.append({"partition": index, "leader": state.leader, "leader_epoch": state.leader_epoch,
                     "replicas": list(state.replicas), "isr": list(state.isr), "offline": list(state.offline),
                     "log_start_offset": _offset(starts, index), "log_end_offset": _offset(ends, index)})
    entries = admin.describe_configs(TOPIC_RESOURCE, found.name)
    configs = [_config_json(entry) for entry in sorted(entries, key=lambda e: e.name)]
    if not all_configs:  # as kafka-topics.sh --describe: the configs that are not at their default
        configs = [entry for entry in configs if entry["source"] != DEFAULT_CONFIG_SOURCE]
    return {"name": found.name, "topic_id": found.topic_id, "internal": found.internal, "partitions": rows,
            "configs": configs}


def _offset(offsets, partition: int):
    """A partition's offset from a list_offsets answer (None when its leader could not say)."""
    found = next((result for result in offsets if result.partition == partition), None)
    return None if found is None or found.error is not None or found.offset < 0 else found.offset


def _config_json(entry) -> dict:
    return {"name": entry.name, "value": None if entry.sensitive else entry.value, "source": entry.source,
            "read_only": bool(entry.read_only), "sensitive": bool(entry.sensitive)}


def _topic_views(document: dict) -> list:
    summary = Fields({"Topic": document["name"], "TopicId": document["topic_id"],
                      "PartitionCount": len(document["partitions"]),
                      "ReplicationFactor": max((len(p["replicas"]) for p in document["partitions"]), default=0)})
    partitions = Table([("partition", "PARTITION"), ("leader", "LEADER"), ("leader_epoch", "EPOCH"),
                        ("replicas", "REPLICAS"), ("isr", "ISR"), ("offline", "OFFLINE"),
                        ("log_start_offset", "LOG-START-OFFSET"), ("log_end_offset", "LOG-END-OFFSET")],
                       document["partitions"])
    views = [summary, partitions]
    if document["configs"]:
        views.append(Table([("name", "CONFIG"), ("value", "VALUE"), ("source", "SOURCE")], document["configs"]))
    return views


# --- delete -------------------------------------------------------------------------------------------------------

@topic.command("delete", epilog=EXIT_CODES_HELP)
@click.argument("names", metavar="NAME...", nargs=-1, required=True)
@click.option("--if-exists", is_flag=True, help="succeed for topics that do not exist")
@client_options
@click.pass_context
def delete(ctx, names, if_exists):
    """Delete topics (DeleteTopics). Exit 1 if any of them could not be deleted."""
    names = list(dict.fromkeys(names))
    admin = make_admin(ctx)
    with kafka_errors("topic delete"):
        results = admin.delete_topics(names)
    rows, failures = [], Failures()
    for name in names:
        error = _single(results, name).error
        missing = error is not None and error.name == "UNKNOWN_TOPIC_OR_PARTITION"
        if error is not None and not (missing and if_exists):
            failures.add(f"topic delete {name}", error)
        rows.append({"name": name, "deleted": error is None, "error": error_json(error)})
    emit(ctx, {"topics": rows}, *(Message(f"Deleted topic {row['name']}.") for row in rows if row["deleted"]))
    return failures.exit_code


# --- alter-config -------------------------------------------------------------------------------------------------

@topic.command("alter-config", epilog=EXIT_CODES_HELP)
@click.argument("name")
@click.option("--set", "settings", metavar="KEY=VALUE", multiple=True, help="set a config (repeatable)")
@click.option("--delete", "deletions", metavar="KEY", multiple=True,
              help="remove a config override, back to the broker's default (repeatable)")
@client_options
@click.pass_context
def alter_config(ctx, name, settings, deletions):
    """Set or remove configs of topic NAME (IncrementalAlterConfigs)."""
    changes = _key_values(settings, "--set")
    if not changes and not deletions:
        raise click.UsageError("give at least one --set KEY=VALUE or --delete KEY")
    operations = [(key, SET, value) for key, value in changes.items()]
    operations += [(key, DELETE, None) for key in deletions]
    admin = make_admin(ctx)
    with kafka_errors(f"topic alter-config {name}"):
        admin.incremental_alter_configs(TOPIC_RESOURCE, name, operations)
    emit(ctx, {"name": name, "set": changes, "deleted": list(deletions), "error": None},
         Message(f"Updated the configs of topic {name}."))

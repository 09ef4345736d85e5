"""`compatbroker consume TOPIC [TOPIC...]`: read records, as kcat -C and kafka-console-consumer.

Without `-g`, every partition of the topics (or those given with `-p`) is read from `-o`: `beginning` (the
default), `end`, an absolute offset `N`, `-N` (the last N records of each partition) or `@TIMESTAMP_MS` (the first
record at or after that time). With `-g GROUP` the command is a member of that consumer group (classic protocol,
range assignor): partitions come from the group, reading starts at the group's committed offsets (`--reset
earliest|latest` where it has none, as auto.offset.reset), and positions are committed as records are written out
(every 5 s, on rebalance and on exit); Ctrl-C commits and leaves the group before exiting 130, and so does
SIGTERM before exiting 143 (compatbroker.cli.signals).

The command exits once every partition has been read up to its end (kcat -e), after `-n COUNT` records, or,
with `--follow`, only when interrupted. A topic deleted while it is read ends the run with
UNKNOWN_TOPIC_OR_PARTITION; with `--follow` the command waits for it to be created again. `--isolation-level
read_committed` skips records of aborted transactions and stops at the last stable offset.

Output (see compatbroker.cli.formats): each value on a line of its own (the default); `--format json`: JSON lines
with topic, partition, offset, timestamp, timestamp_type, key, value and headers (bytes that are not UTF-8 as
`{"base64": ...}`); `-f TEMPLATE`: kcat's format string (%t %p %o %k %K %s %S %R %T %h, \\n \\t escapes). A
progress line (records/s, MB/s) is shown on stderr when it is a terminal, and a summary line ends the run.

Consumer settings under the Java consumer's names (`group.id`, `auto.offset.reset`, `isolation.level`,
`fetch.max.wait.ms`, `fetch.min.bytes`, `fetch.max.bytes`, `max.partition.fetch.bytes`, `check.crcs`,
`session.timeout.ms`, `heartbeat.interval.ms`, `max.poll.interval.ms`, `auto.commit.interval.ms`) are read from
`--command-config` / `-X` where no option gives them, so a consumer.properties file of Kafka's tools works as it is.

Exit codes: 0 done; 1 the broker answered an error (unknown topic, authorization, ...); 2 usage; 3 the cluster
could not be reached; 130 interrupted (Ctrl-C); 143 stopped by SIGTERM.
"""
from __future__ import annotations

import os
import sys

import click

from ..client.consumer import READ_COMMITTED, READ_UNCOMMITTED, Consumer, OffsetSpec, parse_offset_spec
from ..client.errors import KafkaError
from ..client.group_member import GroupConsumer
from ..protocol.error_codes import ErrorCode
from .errors import EXIT_CODES_HELP, EXIT_OK, CliError, from_kafka_error
from .formats import (Meter, TemplateError, binary_stream, boolean, choice, compile_template, json_line, natural,
                      raw_line, settings_from_properties)
from .options import client_options, make_client, output_format
from .signals import EXIT_CODES_NOTE, sigterm_as_interrupt, stop_held, stopped

ISOLATION_LEVELS = {"read_uncommitted": READ_UNCOMMITTED, "read_committed": READ_COMMITTED}
MAX_RECORDS_PER_POLL = 500  # max.poll.records
# consumer settings of --command-config / -X (Java names), used where the matching option is not given
CONSUMER_PROPERTIES = {
    "group.id": ("group", str),
    "auto.offset.reset": ("reset", choice("earliest", "latest")),
    "isolation.level": ("isolation_level", choice(*ISOLATION_LEVELS)),
    "fetch.max.wait.ms": ("max_wait_ms", natural),
    "fetch.min.bytes": ("min_bytes", natural),
    "fetch.max.bytes": ("max_bytes", natural),
    "max.partition.fetch.bytes": ("max_partition_bytes", natural),
    "check.crcs": ("check_crcs", boolean),
    "session.timeout.ms": ("session_timeout_ms", natural),
    "heartbeat.interval.ms": ("heartbeat_interval_ms", natural),
    "max.poll.interval.ms": ("rebalance_timeout_ms", natural),
    "auto.commit.interval.ms": ("auto_commit_interval_ms", natural),
}
FETCH_SETTINGS = ("max_wait_ms", "min_bytes", "max_bytes", "max_partition_bytes", "check_crcs")
MEMBER_SETTINGS = ("session_timeout_ms", "heartbeat_interval_ms", "rebalance_timeout_ms")


def _offset_spec(ctx, param, value):
    if value is None:
        return None
    try:
        return parse_offset_spec(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def _template(ctx, param, value):
    if value is None:
        return None
    try:
        return compile_template(value)
    except TemplateError as exc:
        raise click.BadParameter(str(exc)) from None


@click.command("consume", epilog=f"{EXIT_CODES_HELP} {EXIT_CODES_NOTE}")
@client_options
@click.argument("topics", nargs=-1, required=True)
@click.option("-p", "--partition", "partitions", type=click.IntRange(min=0), multiple=True,
              help="read only this partition (repeatable; default: all)")
@click.option("-o", "--offset", "spec", metavar="OFFSET", callback=_offset_spec,
              help="where to start: beginning (default), end, N, -N (last N), @TIMESTAMP_MS")
@click.option("-g", "--group", metavar="GROUP", help="consume as a member of this consumer group")
@click.option("--reset", type=click.Choice(["earliest", "latest"]), default="earliest", show_default=True,
              help="with -g: where to start in partitions the group has no committed offset for")
@click.option("-n", "--count", type=click.IntRange(min=1), help="exit after COUNT records")
@click.option("--follow/--no-follow", default=False,
              help="keep waiting for new records instead of exiting at the end of the partitions")
@click.option("-f", "--template", callback=_template, metavar="TEMPLATE",
              help="kcat-like format: %t topic %p partition %o offset %k key %s value %S value size "
                   "%h headers %T timestamp, \\n \\t escapes")
@click.option("--isolation-level", type=click.Choice(list(ISOLATION_LEVELS)), default="read_uncommitted",
              show_default=True, help="read_committed: skip aborted transactions, stop at the last stable offset")
@click.pass_context
def consume(ctx, topics, partitions, spec, group, reset, count, follow, template, isolation_level):
    """Read records from TOPICS and write them to stdout.

    Exits at the end of every partition (kcat -e), after -n COUNT records, or with --follow when interrupted.
    Output: each value on its own line (default); --format json: one JSON object per record (topic, partition,
    offset, timestamp, timestamp_type, key, value, headers; bytes that are not UTF-8 as {"base64": ...});
    -f TEMPLATE: kcat's format string. With -g GROUP, reading starts at the group's committed offsets and the
    positions written out are committed (every 5 s, on rebalance, on exit).
    """
    client = make_client(ctx, extra_names=CONSUMER_PROPERTIES)
    chosen = settings_from_properties(ctx, client.config.properties, CONSUMER_PROPERTIES, {
        "group": group, "reset": reset, "isolation_level": isolation_level})
    group = chosen.pop("group")
    if group and (partitions or spec is not None):
        raise click.UsageError("-p and -o do not combine with -g: the group assigns partitions and starts from its "
                               "committed offsets (--reset for partitions without one)", ctx)
    render = template or (json_line if output_format(ctx) == "json" else raw_line)
    options = {"isolation_level": ISOLATION_LEVELS[chosen["isolation_level"]], "reset": chosen["reset"],
               "wait_for_topics": follow, **{name: chosen[name] for name in FETCH_SETTINGS if name in chosen}}
    meter = Meter("consumed", writes_stdout=True)
    source, stop = None, None
    try:
        with sigterm_as_interrupt():
            try:
                source = _open(client, group, topics, partitions, spec, chosen, options)
                _copy(source, render, count, follow, meter)
            except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM
                stop = exc
            finally:
                if isinstance(source, GroupConsumer):
                    _close_quietly(source)
    except KafkaError as exc:
        meter.close()
        raise from_kafka_error(f"consume {' '.join(topics)}", exc) from None
    meter.close()
    click.echo(meter.summary(f"from {', '.join(topics)}"), err=True)
    return EXIT_OK if stop is None else stopped(stop)


def _open(client, group, topics, partitions, spec, chosen, options):
    """The Consumer of the chosen partitions, or the GroupConsumer of `group`."""
    if group:
        _check_topics(client, topics, ())
        return _group_consumer(client, group, topics, chosen, options)
    source = Consumer(client, **options)
    source.assign(_check_topics(client, topics, partitions), spec or OffsetSpec("earliest"))
    return source


def _group_consumer(client, group, topics, chosen, options) -> GroupConsumer:
    if "auto_commit_interval_ms" in chosen:
        options = {**options, "auto_commit_interval_ms": chosen["auto_commit_interval_ms"]}
    member_options = {name: chosen[name] for name in MEMBER_SETTINGS if name in chosen}
    return GroupConsumer(client, group, topics, member_options=member_options, **options)


def _check_topics(client, topics, partitions) -> list[tuple[str, int]]:
    """The (topic, partition) pairs to read; the topics' KafkaError (UNKNOWN_TOPIC_OR_PARTITION...) otherwise."""
    chosen = []
    for topic in topics:
        known = sorted(client.topic(topic, refresh=True).partitions)
        missing = [p for p in partitions if p not in known]
        if missing:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             f"topic {topic} has no partition {missing[0]} (it has {len(known)})")
        chosen.extend((topic, p) for p in (sorted(set(partitions)) or known))
    return chosen


def _copy(source, render, count, follow, meter) -> None:
    """Write records until the end or COUNT records (Ctrl-C and SIGTERM go up as KeyboardInterrupt). Records whose
    write failed, or that a Ctrl-C caught between the consumer and us, are given back to the consumer (`rewind`,
    `rewind_to`), so that a group never commits what did not reach stdout."""
    out = binary_stream(sys.stdout)
    written = 0
    try:
        while count is None or written < count:
            wanted = MAX_RECORDS_PER_POLL if count is None else min(MAX_RECORDS_PER_POLL, count - written)
            records = _poll(source, wanted)
            if records:
                _write(out, source, render, records)
                written += len(records)
                meter.add(len(records), sum(len(r.value or b"") + len(r.key or b"") for r in records))
            if not follow and source.at_end():
                break
    except BrokenPipeError:
        _silence_stdout()  # the reader went away (`| head`): stop quietly, as a Unix filter does


def _poll(source, max_records: int) -> list:
    """source.poll; a Ctrl-C landing after it handed records out but before they reached us takes them back."""
    before = source.positions()
    try:
        return source.poll(max_records=max_records)
    except KeyboardInterrupt:
        source.rewind_to(before)
        raise


def _write(out, source, render, records) -> None:
    data = b"".join(render(record) for record in records)
    flushed = False
    with stop_held():  # SIGTERM and a first Ctrl-C wait for the write: what reached stdout is committed
        try:
            out.write(data)
            out.flush()
            flushed = True
        except BaseException as exc:  # a closed pipe, a full disk, a second Ctrl-C: the records go back
            if not flushed:  # (some may be out already: read again rather than lost)
                source.rewind(records)
            if isinstance(exc, OSError) and not isinstance(exc, BrokenPipeError):
                raise CliError("consume", None, f"cannot write to stdout: {exc.strerror or exc}") from None
            raise


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's last flush does not fail on the closed pipe too."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def _close_quietly(source: GroupConsumer) -> None:
    """Commit and leave the group; a failure here is reported but does not hide the run's own outcome."""
    try:
        source.close()
    except KafkaError as exc:
        click.echo(from_kafka_error("leaving the group", exc).format_message(), err=True)

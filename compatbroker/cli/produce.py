"""`compatbroker produce TOPIC`: one record per line of stdin (or --file), as kcat -P and kafka-console-producer.

Lines end with `\\n` (an `\\r\\n` ending is taken too); empty lines are skipped. A line longer than
max.request.size cannot become a record: it is not held in memory but skipped as it streams in, reported as a failed
record (MESSAGE_TOO_LARGE, Kafka's RecordTooLargeException) and the next line is read, as Kafka's console producer
goes on after a record the producer refused (the run then exits 1). `-K SEP` splits each line at the
first SEP into key and value (a line without SEP is a value with a null key); `-H name=value` adds a header to every
record. Records go to `-p PARTITION`, or where the partitioner puts them (`murmur2` as the Java client: the key's
murmur2 hash, sticky batches for keyless records; `round-robin`; `random`), batched per partition
(`--linger-ms`, `--batch-size`), compressed with `--compression`, acknowledged per `--acks`; idempotent (producer
id and sequence numbers) unless `--acks` is 0 or 1 or `--no-idempotent` says otherwise, as Kafka's producer and
kafka-console-producer are since Kafka 3.0. The same settings
under the Java producer's names (`acks`, `compression.type`, `linger.ms`, `batch.size`, `enable.idempotence`,
`max.request.size`, `delivery.timeout.ms`, `buffer.memory`, `max.block.ms`) are read from `--command-config` / `-X`
where no option gives them, so a producer.properties file of Kafka's tools works as it is.

Memory stays bounded: records waiting for an answer take at most buffer.memory (default 33554432) bytes; when it is
used up, reading stops until answers free some (backpressure), and a record that finds no room within max.block.ms
(default 60000) fails with REQUEST_TIMED_OUT, as the Java producer's send() does (exit 3 when every failure is a
timeout).

While stdin stays open, batches leave when full or after linger.ms (input is read with select, so an interactive
line is sent without waiting for more). A live progress line (records/s, MB/s) is shown on stderr when stderr is a
terminal; a summary line (records, bytes, seconds) always ends the run on stderr.

`--format json` prints one JSON line per record on stdout once it is acknowledged (or failed):
`{"topic": ..., "partition": ..., "offset": ..., "timestamp": ..., "error": null}`; offset is -1 with --acks 0
(nothing comes back), and a failed record has `"offset": null` and `"error": {"code", "name", "message"}`.

Exit codes: 0 every record was written; 1 some record failed (each distinct error reported once on stderr);
2 usage; 3 the cluster could not be reached; 130 interrupted by Ctrl-C, 143 stopped by SIGTERM (in both cases what
was read is still sent first; compatbroker.cli.signals).
"""
from __future__ import annotations

import json
import os
import select
import sys

import click

from ..client.errors import KafkaError
from ..client.partitioner import PARTITIONERS
from ..client.producer import COMPRESSION_TYPES, Producer, RecordMetadata
from ..protocol.error_codes import ErrorCode
from .errors import EXIT_CODES_HELP, EXIT_FAILED, EXIT_OK, EXIT_UNREACHABLE, from_kafka_error, is_unreachable, report
from .formats import Meter, binary_stream, boolean, choice, natural, settings_from_properties, split_record, unescape
from .options import client_options, make_client, output_format, parse_key_value
from .signals import EXIT_CODES_NOTE, sigterm_as_interrupt, stopped

READ_SIZE = 65536
ACKS = {"all": -1, "-1": -1, "0": 0, "1": 1}
# producer settings of --command-config / -X (Java names), used where the matching option is not given
PRODUCER_PROPERTIES = {
    "acks": ("acks", choice(*ACKS)),
    "compression.type": ("compression", choice(*COMPRESSION_TYPES)),
    "linger.ms": ("linger_ms", natural),
    "batch.size": ("batch_size", natural),
    "enable.idempotence": ("idempotent", boolean),
    "max.request.size": ("max_request_size", natural),
    "delivery.timeout.ms": ("delivery_timeout_ms", natural),
    "buffer.memory": ("buffer_memory", natural),
    "max.block.ms": ("max_block_ms", natural),
}


@click.command("produce", epilog=f"{EXIT_CODES_HELP} {EXIT_CODES_NOTE}")
@client_options
@click.argument("topic")
@click.option("--file", "input_file", type=click.File("rb"), metavar="FILE",
              help="read records from FILE instead of stdin")
@click.option("-K", "--key-separator", metavar="SEP",
              help="split each line at the first SEP into key and value (kcat's -K; escapes \\t \\xHH)")
@click.option("-H", "--header", "headers", metavar="NAME=VALUE", multiple=True,
              help="a header for every record (repeatable)")
@click.option("-p", "--partition", type=click.IntRange(min=0), help="write every record to this partition")
@click.option("--partitioner", type=click.Choice(list(PARTITIONERS)), default="murmur2", show_default=True,
              help="murmur2: by key as the Java client (sticky without a key); round-robin; random")
@click.option("-z", "--compression", type=click.Choice(list(COMPRESSION_TYPES)), default="none",
              show_default=True, help="compression.type of the batches")
@click.option("--acks", type=click.Choice(list(ACKS)), default="all", show_default=True,
              help="0: do not wait; 1: the leader; all (-1): every in-sync replica")
@click.option("--linger-ms", type=click.IntRange(min=0), default=5, show_default=True,
              help="how long a batch waits for more records")
@click.option("--batch-size", type=click.IntRange(min=1), default=16384, show_default=True,
              help="bytes at which a batch is sent")
@click.option("--idempotent/--no-idempotent", default=None,
              help="enable.idempotence: producer id and sequence numbers, so that a retried batch is written once "
                   "(needs --acks all) [default: on with --acks all, as Kafka's producer]")
@click.pass_context
def produce(ctx, topic, input_file, key_separator, headers, partition, partitioner, compression, acks, linger_ms,
            batch_size, idempotent):
    """Write records to TOPIC: one per line of stdin (or --file).

    Empty lines are skipped; with -K SEP a line is KEY SEP VALUE (no SEP: a null key). Producer settings under
    their Java names (acks, compression.type, linger.ms, batch.size, enable.idempotence, max.request.size,
    delivery.timeout.ms, buffer.memory, max.block.ms) are read from --command-config / -X where no option sets them.
    A line longer than max.request.size fails as MESSAGE_TOO_LARGE and the next is read. A summary line (records,
    bytes, seconds) ends on stderr. --format json: one JSON line per record once acknowledged, {"topic",
    "partition", "offset", "timestamp", "error"} (offset -1 with --acks 0; error null or {"code", "name",
    "message"}).
    """
    client = make_client(ctx, extra_names=PRODUCER_PROPERTIES)
    chosen = settings_from_properties(ctx, client.config.properties, PRODUCER_PROPERTIES, {
        "acks": acks, "compression": compression, "linger_ms": linger_ms, "batch_size": batch_size,
        "idempotent": idempotent})
    chosen["acks"] = ACKS[chosen["acks"]]
    chosen["enable_idempotence"] = _idempotence(ctx, chosen.pop("idempotent"), chosen["acks"])
    record_headers = [_header(text) for text in headers]
    separator = unescape(key_separator) if key_separator else None
    run = _Run(topic, output_format(ctx) == "json")
    try:
        producer = Producer(client, partitioner=partitioner, on_delivery=run.delivered, **chosen)
        producer.partitions_for(topic)  # fail early: unknown topic, unreachable cluster
        stream = input_file or binary_stream(sys.stdin)
        stop = _pump(stream, producer, run, topic, separator, record_headers, partition)
    except KafkaError as exc:
        run.meter.close()
        raise from_kafka_error(f"produce {topic}", exc) from None
    return run.finish(stop)


def _idempotence(ctx, asked: bool | None, acks: int) -> bool:
    """enable.idempotence as Kafka's producer (KIP-679) settles it: on by default, off by default where acks is not
    all, and a usage error where it is asked for with acks other than all. A batch resent after a lost answer (a
    broken connection, Ctrl-C while a request was out) is then written once."""
    if asked is None:
        return acks == -1
    if asked and acks != -1:
        raise click.UsageError("--idempotent (enable.idempotence) needs --acks all", ctx)
    return asked


def _header(text: str) -> tuple[str, bytes]:
    name, value = parse_key_value(text, "-H")
    return name, os.fsencode(value)


def _pump(stream, producer: Producer, run, topic, separator, headers, partition) -> KeyboardInterrupt | None:
    """Read records and send them until the input ends; what stopped the reading early (Ctrl-C, SIGTERM), if
    anything. Either way, what was read is flushed."""
    def too_long(size: int) -> None:
        run.sent += 1
        run.delivered(RecordMetadata(topic, -1 if partition is None else partition, -1, -1, size, KafkaError(
            ErrorCode.MESSAGE_TOO_LARGE, f"The message is at least {size} bytes which is larger than "
                                         f"{producer.max_request_size}, which is the value of the max.request.size "
                                         f"configuration.")))
    lines = _Lines(producer.max_request_size, too_long)
    stop = None
    with sigterm_as_interrupt():
        try:
            for chunk in _chunks(stream, producer):
                for line in lines.feed(chunk):
                    _send(producer, run, topic, line, separator, headers, partition)
                producer.poll()
            for line in lines.finish():
                _send(producer, run, topic, line, separator, headers, partition)
        except KeyboardInterrupt as exc:
            stop = exc
        producer.flush()
    return stop


class _Lines:
    """The non-empty lines of input arriving in chunks (without `\\n` / `\\r\\n`), each chunk scanned once. A line
    longer than `limit` bytes is never held whole: its bytes are counted and dropped as they arrive, and
    `on_too_long(size)` reports it once it ends."""

    def __init__(self, limit: int, on_too_long):
        self.limit = limit
        self.on_too_long = on_too_long
        self._partial = bytearray()
        self._dropped = 0  # bytes of the current line seen so far once it passed the limit (0: within it)

    def feed(self, chunk: bytes):
        """The lines `chunk` ends, in order (a too-long one reported in its place)."""
        *ended, rest = chunk.split(b"\n")
        for tail in ended:
            if line := self._end_line(tail):
                yield line
        self._extend(rest)

    def finish(self) -> list[bytes]:
        """The last line, when the input did not end with a newline."""
        if not (self._partial or self._dropped):
            return []
        line = self._end_line(b"")
        return [line] if line else []

    def _extend(self, data: bytes) -> None:
        if self._dropped:
            self._dropped += len(data)
            return
        self._partial += data
        if len(self._partial) > self.limit:
            self._dropped = len(self._partial)
            self._partial.clear()

    def _end_line(self, tail: bytes) -> bytes | None:
        self._extend(tail)
        if self._dropped:
            size, self._dropped = self._dropped, 0
            self.on_too_long(size)
            return None
        line = bytes(self._partial)
        self._partial.clear()
        return line[:-1] if line.endswith(b"\r") else line


def _send(producer: Producer, run, topic, line: bytes, separator, headers, partition) -> None:
    key, value = split_record(line, separator)
    producer.send(topic, value, key=key, headers=headers, partition=partition)
    run.sent += 1


def _chunks(stream, producer: Producer):
    """Input as it arrives. With a real file descriptor, select() waits no longer than the oldest waiting batch's
    linger.ms, so records typed at a terminal leave without waiting for more input."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        fd = None
    if fd is None:  # an in-memory stream (tests, embedding): no waiting to do
        while chunk := stream.read(READ_SIZE):
            yield chunk
        return
    while True:
        wait = producer.time_until_ready()
        if wait is not None and not select.select([fd], [], [], wait)[0]:
            producer.poll()
            continue
        chunk = os.read(fd, READ_SIZE)
        if not chunk:
            return
        yield chunk


class _Run:
    """Outcomes of one produce run: per-record JSON lines, counts, distinct errors, the summary and exit code."""

    def __init__(self, topic: str, json_lines: bool):
        self.topic = topic
        self.json_lines = json_lines
        self.sent = 0
        self.failed = 0
        self.errors: dict[str, object] = {}  # error name -> first KafkaError of that name
        self.meter = Meter("produced", writes_stdout=json_lines)
        self._out = binary_stream(sys.stdout)

    def delivered(self, result) -> None:
        if result.error is None:
            self.meter.add(1, result.size)
        else:
            self.failed += 1
            self.errors.setdefault(result.error.name, result.error)
        if self.json_lines:
            document = {"topic": result.topic, "partition": result.partition,
                        "offset": None if result.error else result.offset, "timestamp": result.timestamp,
                        "error": result.error.to_json() if result.error else None}
            self._out.write(json.dumps(document).encode("utf-8") + b"\n")
            self._out.flush()

    def finish(self, stop: KeyboardInterrupt | None) -> int:
        self.meter.close()
        for name, error in self.errors.items():
            report(f"produce {self.topic}", name, error.message)
        where = f"to {self.topic}" + (f", {self.failed} failed" if self.failed else "")
        click.echo(self.meter.summary(where), err=True)
        if stop is not None:
            return stopped(stop)
        if not self.failed:
            return EXIT_OK
        return EXIT_UNREACHABLE if all(is_unreachable(e) for e in self.errors.values()) else EXIT_FAILED

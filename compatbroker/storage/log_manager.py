"""Every partition log of a node, under its log directories (`log.dirs`), and the files that describe them.

Layout (Kafka's), in each log directory:

    <log dir>/meta.properties                    cluster.id, node.id, directory.id, version=1 (KRaft)
    <log dir>/recovery-point-offset-checkpoint   per partition: offsets below are fsynced
    <log dir>/log-start-offset-checkpoint        per partition: the log start offset
    <log dir>/cleaner-offset-checkpoint          per partition: the first offset the cleaner has not compacted
    <log dir>/replication-offset-checkpoint      per partition: the high watermark (replicated partitions only;
                                                 the file is written once one has a high watermark of its own)
    <log dir>/.kafka_cleanshutdown               present only between a clean shutdown and the next start
    <log dir>/<topic>-<partition>/               segments, leader-epoch-checkpoint, partition.metadata (topic id)

JBOD (several log directories): every directory has the same cluster id and node id in its `meta.properties`, and
its own `directory.id` and checkpoint files, which describe the partitions it holds. A partition lives in exactly
one directory (found in two: LogDirError at start-up); a new one goes to the directory holding the fewest
partitions, the first listed on a tie (Kafka's rule). `move_log` (AlterReplicaLogDirs) moves one: Kafka copies
into `<topic>-<partition>.<uuid hex>-future` in the destination and swaps; here the copy is synchronous, of the
closed log's files (so the offsets, epochs, producer snapshots and high watermark come along), then the source
directory is renamed `-delete` and the future one takes the partition's name. A `-future` directory found at
start-up is a move a crash interrupted: it is removed if the partition is still live elsewhere (the copy may be
incomplete), and takes the partition's name if not (the source was already renamed `-delete`, which happens only
after the copy was fsynced).

The first directory (`data_dir`) also holds the node-level files. Per-topic configuration overrides live there in
one file, `compatbroker-topic-configs.json`
(`{"<topic>": {"<config name>": "<value>", ...}}`), written atomically. Kafka keeps overrides in its metadata log,
which we do not have; a file beside the partition directories is ignored by Kafka's own tools.

Creating partitions (`create_topic`, `create_partitions`) is all or nothing, as in Kafka: if one fails (out of
descriptors, of disk space), the ones already created by the call are closed and removed before the error is
raised. The fsyncs (of each `partition.metadata`, each partition directory, and the data directory once) come at the
end of the call, before it returns.

Deleting a partition renames its directory to `<topic>-<partition>.<uuid hex>-delete` (Kafka's name) before
removing it, so a crash halfway leaves nothing that loads as a partition; leftovers are removed at start-up.
The checkpoints are written per directory (`write_checkpoints` with the manager's `log_dirs`).

The manager runs the periodic work when the broker asks: `flush_due` (flush.ms, and the fsync of rolled segments:
call it every second or so even when flush.ms is Kafka's "never", and in an executor, since it fsyncs),
`checkpoint` (recovery points and log start offsets), `run_retention`, `run_cleaner` (or
`prepare_clean`/`commit_clean` for an executor; the cleaner never goes past a partition's last stable offset, see
`cleaner`, and a checkpointed first dirty offset outside the log is reset to the log start offset, as in Kafka).
`write_checkpoints` may run in executor threads, several at once: each file is written in turn, newest state last
(see `checkpoints`); the temp files of writes a crash interrupted are removed at start-up. It owns one worker
thread that the logs share to check the CRC of large appends beside their write (see `Log`).
"""
from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from collections.abc import Sequence
from typing import NamedTuple

from .checkpoints import (CLEAN_SHUTDOWN_MARKER, CLEANER_OFFSET_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT,
                          META_PROPERTIES, PARTITION_METADATA, RECOVERY_POINT_CHECKPOINT,
                          REPLICATION_OFFSET_CHECKPOINT, CheckpointError,
                          WriteTicket, fsync_path, read_offsets, read_partition_metadata,
                          read_properties, remove_temp_files, uuid_to_string, write_atomically, write_offsets,
                          write_partition_metadata, write_properties)
from .cleaner import CleanPlan, commit_clean, needs_cleaning, prepare_clean
from .errors import LogDirError
from .log import Log
from .log_config import LogConfig, StorageConfig
from .retention import apply_retention

TOPIC_CONFIGS_FILE = "compatbroker-topic-configs.json"
DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"

TopicPartition = tuple[str, int]


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_partition_dir(name: str) -> TopicPartition | None:
    """(topic, partition) of a `<topic>-<partition>` directory name; None for anything else."""
    topic, sep, number = name.rpartition("-")
    if not sep or not topic or not number.isdigit() or "." in number:
        return None
    return topic, int(number)


def _write_log_start_offsets(log_dir: str, logs: dict[TopicPartition, Log]) -> None:
    path = os.path.join(log_dir, LOG_START_OFFSET_CHECKPOINT)
    in_dir = {tp: log for tp, log in logs.items() if os.path.dirname(log.directory) == log_dir}
    write_offsets(path, lambda: {tp: log.log_start_offset for tp, log in _open_logs(in_dir)
                                 if log.log_start_offset > 0}, ticket=WriteTicket(path))


def _open_logs(logs: dict[TopicPartition, Log]) -> list[tuple[TopicPartition, Log]]:
    return [(tp, log) for tp, log in logs.items() if not log.closed]  # a closed log was deleted meanwhile


def _logs_by_dir(log_dirs: str | Sequence[str], logs: dict[TopicPartition, Log]) -> dict[str, dict]:
    """The logs grouped by the log directory holding them; every directory of `log_dirs` appears."""
    groups: dict[str, dict[TopicPartition, Log]] = {
        os.path.abspath(path): {} for path in ([log_dirs] if isinstance(log_dirs, str) else log_dirs)}
    for tp, log in logs.items():
        groups.setdefault(os.path.dirname(log.directory), {})[tp] = log
    return groups


def write_checkpoints(log_dirs: str | Sequence[str], logs: dict[TopicPartition, Log],
                      first_dirty_offsets: dict[TopicPartition, int]) -> None:
    """Write the recovery points, log start offsets, cleaner offsets and high watermarks of `logs`, each log
    directory's files with the partitions it holds (`log_dirs`: the manager's, or one of them; a directory holding
    one of `logs` is written too). Safe in an executor thread given copies of the manager's dicts (the loop may
    add a partition meanwhile), and beside another call: each file is written in turn, with the values read once
    the turn has come, and a call that started before one that has already written a file leaves that file alone
    (its copy of the dicts is the older)."""
    for log_dir, dir_logs in _logs_by_dir(log_dirs, logs).items():
        _write_dir_checkpoints(log_dir, dir_logs, first_dirty_offsets)


def _write_dir_checkpoints(log_dir: str, logs: dict[TopicPartition, Log],
                           first_dirty_offsets: dict[TopicPartition, int]) -> None:
    paths = [os.path.join(log_dir, name) for name in (RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT,
                                                       CLEANER_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT)]
    tickets = [WriteTicket(path) for path in paths]
    write_offsets(paths[0], lambda: {tp: log.recovery_point for tp, log in _open_logs(logs)}, ticket=tickets[0])
    write_offsets(paths[1], lambda: {tp: log.log_start_offset for tp, log in _open_logs(logs)
                                     if log.log_start_offset > 0}, ticket=tickets[1])
    write_offsets(paths[2], lambda: {tp: offset for tp, offset in first_dirty_offsets.items()
                                     if tp in logs and not logs[tp].closed}, ticket=tickets[2])
    # Only replicated partitions have a high watermark of their own: a single-replica node writes no such file.
    if any(log.high_watermark_set for log in logs.values()) or os.path.exists(paths[3]):
        write_offsets(paths[3], lambda: {tp: log.high_watermark for tp, log in _open_logs(logs)
                                         if log.high_watermark_set}, ticket=tickets[3])


class LogManager:
    def __init__(self, data_dirs: str | Sequence[str], *, broker_properties: dict | None = None,
                 cluster_id: str | None = None, node_id: int = 1):
        """`data_dirs`: the node's log directories (`log.dirs`), or one directory."""
        dirs = [data_dirs] if isinstance(data_dirs, str) else list(data_dirs)
        if not dirs:
            raise LogDirError("log.dirs names no directory")
        self.log_dirs: list[str] = [os.path.abspath(path) for path in dirs]
        if len(set(self.log_dirs)) != len(self.log_dirs):
            raise LogDirError(f"log.dirs names a directory twice: {', '.join(self.log_dirs)}")
        self.data_dir = self.log_dirs[0]  # also holds the node-level files
        self.broker_properties = dict(broker_properties or {})
        self.storage_config = StorageConfig.from_properties(self.broker_properties)
        self.default_config = LogConfig.from_properties(self.broker_properties)
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.logs: dict[TopicPartition, Log] = {}
        self.topic_ids: dict[str, uuid.UUID] = {}
        self.topic_overrides: dict[str, dict[str, str]] = {}
        self.first_dirty_offsets: dict[TopicPartition, int] = {}
        self.clean_shutdown = False  # of every log directory

    # --- start-up and shutdown ------------------------------------------------------------------------------------

    def startup(self, now_ms: int) -> None:
        """Check each directory's `meta.properties`, then load every partition, recovering those a crash may have
        torn, and finish (or undo) the log directory moves a crash interrupted."""
        for log_dir in self.log_dirs:
            os.makedirs(log_dir, exist_ok=True)
            remove_temp_files(log_dir)  # of checkpoint writes a crash interrupted
            self._ensure_meta_properties(log_dir)
        self.topic_overrides = self._read_topic_configs()
        found = self._scan_log_dirs()
        markers = [os.path.join(log_dir, CLEAN_SHUTDOWN_MARKER) for log_dir in self.log_dirs]
        clean = [os.path.exists(marker) for marker in markers]
        self.clean_shutdown = all(clean)
        configs: dict[str, LogConfig] = {}
        for log_dir, dir_clean in zip(self.log_dirs, clean):
            checkpoints = [self._read_checkpoint(log_dir, name) for name in (
                RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT, CLEANER_OFFSET_CHECKPOINT,
                REPLICATION_OFFSET_CHECKPOINT)]
            recovery_points, start_offsets, dirty, high_watermarks = checkpoints
            for tp in sorted(tp for tp, path in found.items() if os.path.dirname(path) == log_dir):
                config = configs.get(tp[0]) or configs.setdefault(tp[0], self.log_config(tp[0]))
                self._load_partition(tp, found[tp], config, recovery_points.get(tp, 0), start_offsets.get(tp, 0),
                                     high_watermarks.get(tp), dir_clean, now_ms)
                if tp in dirty:
                    self.first_dirty_offsets[tp] = dirty[tp]
        for marker, dir_clean in zip(markers, clean):
            if dir_clean:
                os.unlink(marker)  # from now on a crash must trigger recovery
        self.checkpoint()

    def _scan_log_dirs(self) -> dict[TopicPartition, str]:
        """The partition directories of every log directory; leftovers of deletions removed, of moves resolved."""
        found: dict[TopicPartition, str] = {}
        futures: list[tuple[TopicPartition, str]] = []
        doomed: list[str] = []
        for log_dir in self.log_dirs:
            with os.scandir(log_dir) as entries:
                names = sorted(entry.name for entry in entries if entry.is_dir())
            for name in names:
                path = os.path.join(log_dir, name)
                if name.endswith(DELETE_DIR_SUFFIX):
                    doomed.append(path)
                elif name.endswith(FUTURE_DIR_SUFFIX):
                    tp = parse_partition_dir(name.rsplit(".", 1)[0])
                    if tp is not None:
                        futures.append((tp, path))
                elif (tp := parse_partition_dir(name)) is not None:
                    if tp in found:
                        raise LogDirError(f"partition {tp[0]}-{tp[1]} is in two log directories: {found[tp]} "
                                          f"and {path}")
                    found[tp] = path
        for tp, path in futures:
            if tp in found:
                shutil.rmtree(path, ignore_errors=True)  # the move had not swapped: the source is the replica
            else:
                found[tp] = os.path.join(os.path.dirname(path), partition_dir_name(*tp))
                os.rename(path, found[tp])  # the source went `-delete` after the copy was complete
                fsync_path(os.path.dirname(path))
        for path in doomed:
            shutil.rmtree(path, ignore_errors=True)
        return found

    def _load_partition(self, tp: TopicPartition, path: str, config: LogConfig, recovery_point: int,
                        start_offset: int, high_watermark: int | None, clean_shutdown: bool, now_ms: int) -> None:
        topic_id = read_partition_metadata(os.path.join(path, PARTITION_METADATA))
        if topic_id is not None:
            known = self.topic_ids.setdefault(tp[0], topic_id)
            if known != topic_id:
                raise LogDirError(f"{path}: topic id {topic_id} differs from {known} of the other partitions")
        self.logs[tp] = Log.open(path, tp[0], tp[1], config, log_start_offset=start_offset,
                                 recovery_point=recovery_point, clean_shutdown=clean_shutdown, now_ms=now_ms,
                                 high_watermark=high_watermark)

    def shutdown(self) -> None:
        """Flush every log, write the checkpoints, close the files, and leave the clean-shutdown markers."""
        for log in self.logs.values():
            log.flush()
        self.checkpoint()
        for log in self.logs.values():
            log.close()
        self.logs = {}
        for log_dir in self.log_dirs:
            write_atomically(os.path.join(log_dir, CLEAN_SHUTDOWN_MARKER), "")

    def close_unclean(self) -> None:
        """Close the files without flushing or marking a clean shutdown (tests: a simulated crash)."""
        for log in self.logs.values():
            log.close()
        self.logs = {}

    # --- meta.properties, topic configs, checkpoints --------------------------------------------------------------

    def _ensure_meta_properties(self, log_dir: str) -> None:
        """Check (or write) a directory's `meta.properties`: every directory of the node has the same cluster id
        (the first one read, or made, decides) and node id, and its own directory id."""
        path = os.path.join(log_dir, META_PROPERTIES)
        try:
            existing = read_properties(path)
        except CheckpointError as exc:
            raise LogDirError(str(exc)) from None
        if existing is None:
            self.cluster_id = self.cluster_id or uuid_to_string(uuid.uuid4())
            write_properties(path, {"cluster.id": self.cluster_id, "node.id": str(self.node_id), "version": "1",
                                    "directory.id": uuid_to_string(uuid.uuid4())})
            return
        if self.cluster_id is not None and existing.get("cluster.id") != self.cluster_id:
            raise LogDirError(f"{path} belongs to cluster {existing.get('cluster.id')!r}, not {self.cluster_id!r}")
        if existing.get("node.id") not in (None, str(self.node_id)):
            raise LogDirError(f"{path} belongs to node {existing.get('node.id')}, not {self.node_id}")
        self.cluster_id = existing.get("cluster.id")

    def _read_topic_configs(self) -> dict[str, dict[str, str]]:
        try:
            with open(os.path.join(self.data_dir, TOPIC_CONFIGS_FILE), encoding="utf-8") as source:
                return json.load(source)
        except FileNotFoundError:
            return {}

    def _write_topic_configs(self) -> None:
        write_atomically(os.path.join(self.data_dir, TOPIC_CONFIGS_FILE),
                         json.dumps(self.topic_overrides, indent=1, sort_keys=True))

    @staticmethod
    def _read_checkpoint(log_dir: str, name: str) -> dict[TopicPartition, int]:
        try:
            return read_offsets(os.path.join(log_dir, name))
        except CheckpointError:
            return {}  # Kafka logs and carries on: recovery from offset 0 is slower but safe

    def checkpoint(self) -> None:
        """Write the recovery points, log start offsets, cleaner offsets and high watermarks of every partition,
        in the files of the directory holding each."""
        write_checkpoints(self.log_dirs, self.logs, self.first_dirty_offsets)

    # --- log directories (JBOD) -----------------------------------------------------------------------------------

    def log_dir_of(self, topic: str, partition: int) -> str | None:
        """The log directory holding the partition, None when this node has no replica of it."""
        log = self.logs.get((topic, partition))
        return None if log is None else os.path.dirname(log.directory)

    def _next_log_dirs(self, count: int) -> list[str]:
        """The directories for `count` new partitions, one at a time to the one holding the fewest (Kafka's
        nextLogDirs), the first listed on a tie."""
        if len(self.log_dirs) == 1:
            return self.log_dirs * count
        held = dict.fromkeys(self.log_dirs, 0)
        for log in self.logs.values():
            parent = os.path.dirname(log.directory)
            if parent in held:
                held[parent] += 1
        chosen = []
        for _ in range(count):
            least = min(self.log_dirs, key=held.__getitem__)
            held[least] += 1
            chosen.append(least)
        return chosen

    def move_log(self, topic: str, partition: int, to_dir: str, *, now_ms: int | None = None) -> Log:
        """Move a partition's replica to another of the log directories (AlterReplicaLogDirs) and return its new
        Log; the old Log object is closed (callers look the log up again). Synchronous: call it where nothing
        appends to the partition meanwhile (the event loop). On an error the replica stays where it was."""
        target = os.path.abspath(to_dir)
        if target not in self.log_dirs:
            raise LogDirError(f"{to_dir} is not one of the log directories {', '.join(self.log_dirs)}")
        log = self.logs.get((topic, partition))
        if log is None:
            raise LogDirError(f"no replica of {topic}-{partition} on node {self.node_id}")
        source_dir = os.path.dirname(log.directory)
        if source_dir == target:
            return log
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        state = (log.log_start_offset, log.high_watermark if log.high_watermark_set else None)
        log.flush()
        log.close()  # seals the indexes, snapshots the producer state at the log end offset
        unique = uuid.uuid4().hex
        future = os.path.join(target, f"{partition_dir_name(topic, partition)}.{unique}{FUTURE_DIR_SUFFIX}")
        path = os.path.join(target, partition_dir_name(topic, partition))
        try:
            _copy_partition_dir(log.directory, future)
            # The destination's checkpoints learn the replica before the swap (the source's still hold it): a
            # crash on either side of the swap finds the offsets beside the directory that start-up keeps.
            self._write_checkpoints_with(target, (topic, partition), _ClosedReplica.of(log, path))
            doomed = f"{log.directory}.{unique}{DELETE_DIR_SUFFIX}"
            os.rename(log.directory, doomed)
        except BaseException:
            shutil.rmtree(future, ignore_errors=True)
            self.logs[(topic, partition)] = self._reopen(log.directory, topic, partition, state, now_ms)
            raise
        fsync_path(source_dir)
        os.rename(future, path)
        fsync_path(target)
        moved = self.logs[(topic, partition)] = self._reopen(path, topic, partition, state, now_ms)
        shutil.rmtree(doomed, ignore_errors=True)
        self.checkpoint()
        return moved

    def _write_checkpoints_with(self, log_dir: str, tp: TopicPartition, replica: _ClosedReplica) -> None:
        """Write `log_dir`'s checkpoint files as if `replica` were already one of its partitions."""
        logs = {key: log for key, log in self.logs.items() if os.path.dirname(log.directory) == log_dir}
        _write_dir_checkpoints(log_dir, {**logs, tp: replica}, self.first_dirty_offsets)

    def _reopen(self, path: str, topic: str, partition: int, state: tuple[int, int | None], now_ms: int) -> Log:
        """Open a log that was closed cleanly (every offset flushed) with its start offset and high watermark."""
        log_start_offset, high_watermark = state
        return Log.open(path, topic, partition, self.log_config(topic), log_start_offset=log_start_offset,
                        recovery_point=2**63 - 1, clean_shutdown=True, now_ms=now_ms,
                        high_watermark=high_watermark)

    # --- topics and partitions ------------------------------------------------------------------------------------

    def log_config(self, topic: str) -> LogConfig:
        return self.default_config.with_overrides(self.topic_overrides.get(topic, {}))

    def reconfigure(self, broker_properties: dict, storage_config: StorageConfig, default_config: LogConfig) -> None:
        """New broker-level settings (dynamic broker configs): every partition without its own override of a
        setting takes the new default, from its next append or storage pass."""
        self.broker_properties = dict(broker_properties)
        self.storage_config = storage_config
        self.default_config = default_config
        configs: dict[str, LogConfig] = {}
        for (topic, _), partition_log in list(self.logs.items()):
            if topic not in configs:
                configs[topic] = self.log_config(topic)
            partition_log.update_config(configs[topic])

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self.logs.get((topic, partition))

    def create_topic(self, topic: str, partitions: int, *, now_ms: int, topic_id: uuid.UUID | None = None,
                     overrides: dict | None = None) -> uuid.UUID:
        """Create the partition directories of a new topic (ConfigError for a bad override). All or nothing, as in
        Kafka: when a partition cannot be created (EMFILE, ENOSPC, ...), those already created are closed and
        removed, the topic id and overrides forgotten, and the error raised."""
        overrides = {name: str(value) for name, value in (overrides or {}).items()}
        self.default_config.with_overrides(overrides)  # validate before touching the disk
        known_id = self.topic_ids.get(topic)
        topic_id = topic_id or known_id or uuid.uuid4()
        self.topic_ids[topic] = topic_id
        try:
            if overrides:
                self.topic_overrides[topic] = overrides
                self._write_topic_configs()
            self.create_partitions(topic, range(partitions), now_ms=now_ms)
        except BaseException:
            self._forget_topic(topic, known_id)
            raise
        return topic_id

    def _forget_topic(self, topic: str, known_id: uuid.UUID | None) -> None:
        """Undo what a failed create_topic recorded (its partitions are already gone)."""
        if any(tp[0] == topic for tp in self.logs):
            return  # partitions of the topic existed before: it stays
        if known_id is None:
            self.topic_ids.pop(topic, None)
        if self.topic_overrides.pop(topic, None) is not None:
            try:
                self._write_topic_configs()
            except OSError:
                pass  # left as it was: the next write of the file corrects it

    def create_partitions(self, topic: str, partitions, *, now_ms: int) -> list[Log]:
        """Create these partitions of `topic` (those that exist already are left alone), each in the log directory
        holding the fewest partitions, all or nothing: if one fails, the ones created by this call are closed and
        their directories removed, then the error is raised. Each log directory that got one is fsynced once at
        the end, which makes every new partition directory durable."""
        created: list[Log] = []
        try:
            missing = [partition for partition in partitions if (topic, partition) not in self.logs]
            for partition, log_dir in zip(missing, self._next_log_dirs(len(missing))):
                created.append(self._create_log(topic, partition, log_dir, now_ms))
            # The fsyncs come last, together: on ext4 a file created after an fsync waits for its journal commit.
            for log in created:
                fsync_path(os.path.join(log.directory, PARTITION_METADATA))
                fsync_path(log.directory)
            for log_dir in dict.fromkeys(os.path.dirname(log.directory) for log in created):
                fsync_path(log_dir)
        except BaseException:
            for log in created:
                try:
                    self.delete_log(log.topic, log.partition)
                except OSError:
                    pass  # best effort: what is left is loaded (or removed) like any partition at start-up
            raise
        return created

    def create_log(self, topic: str, partition: int, *, now_ms: int) -> Log:
        """Create (or return) one partition's log; the topic id must be known (create_topic sets it)."""
        return self.logs.get((topic, partition)) or self.create_partitions(topic, [partition], now_ms=now_ms)[0]

    def _create_log(self, topic: str, partition: int, log_dir: str, now_ms: int) -> Log:
        """One partition's directory, `partition.metadata` and log. The directory is removed again if the log
        cannot be opened; the caller fsyncs `partition.metadata`, the partition directory and the log directory."""
        topic_id = self.topic_ids.setdefault(topic, uuid.uuid4())
        path = os.path.join(log_dir, partition_dir_name(topic, partition))
        made = not os.path.isdir(path)
        os.makedirs(path, exist_ok=True)
        try:
            write_partition_metadata(os.path.join(path, PARTITION_METADATA), topic_id, sync=False)
            log = Log.open(path, topic, partition, self.log_config(topic), now_ms=now_ms, clean_shutdown=True)
        except BaseException:
            if made:
                shutil.rmtree(path, ignore_errors=True)
            raise
        self.logs[(topic, partition)] = log
        return log

    def delete_topic(self, topic: str) -> None:
        for tp in [tp for tp in self.logs if tp[0] == topic]:
            self.delete_log(*tp)
        self.topic_ids.pop(topic, None)
        if self.topic_overrides.pop(topic, None) is not None:
            self._write_topic_configs()

    def delete_log(self, topic: str, partition: int) -> None:
        """Rename the partition directory to its `-delete` name, close the log, then remove the directory."""
        log = self.logs.pop((topic, partition), None)
        if log is None:
            return
        self.first_dirty_offsets.pop((topic, partition), None)
        doomed = f"{log.directory}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
        os.rename(log.directory, doomed)
        log.close()
        shutil.rmtree(doomed, ignore_errors=True)

    def set_topic_config(self, topic: str, overrides: dict) -> LogConfig:
        """Replace a topic's overrides (an empty dict restores the broker defaults), persist them and apply them."""
        overrides = {name: str(value) for name, value in overrides.items()}
        config = self.default_config.with_overrides(overrides)
        if overrides:
            self.topic_overrides[topic] = overrides
        else:
            self.topic_overrides.pop(topic, None)
        self._write_topic_configs()
        for (log_topic, _), log in self.logs.items():
            if log_topic == topic:
                log.update_config(config)
        return config

    # --- periodic work --------------------------------------------------------------------------------------------

    def flush_due(self, now_ms: int) -> int:
        """Flush the logs whose `flush.ms` has passed, and the segments rolled since the last flush; returns how
        many logs were flushed. It fsyncs: run it in an executor."""
        return sum(log.maybe_flush(now_ms) for log in list(self.logs.values()))

    def delete_records(self, topic: str, partition: int, offset: int, *, now_ms: int) -> int:
        """DeleteRecords on one partition (see `Log.delete_records`), with the new log start offset checkpointed
        at once: records a client deleted must not come back after a crash. Returns the new log start offset."""
        log = self.logs[(topic, partition)]
        start = log.delete_records(offset, now_ms=now_ms)
        _write_log_start_offsets(os.path.dirname(log.directory), self.logs)
        return start

    def run_retention(self, now_ms: int) -> int:
        """Apply retention to every log; returns the number of segments deleted."""
        deleted = sum(apply_retention(log, now_ms) for log in list(self.logs.values()))
        if deleted:
            self.checkpoint()
        return deleted

    def prepare_clean(self, tp: TopicPartition, now_ms: int) -> CleanPlan | None:
        log = self.logs.get(tp)
        if log is None:
            return None
        first_dirty = self.first_dirty_offsets.get(tp, 0)
        if first_dirty < log.log_start_offset or first_dirty > log.log_end_offset:
            first_dirty = log.log_start_offset  # Kafka's reset: retention passed it, or the log was truncated
        if not needs_cleaning(log, first_dirty, now_ms):
            return None
        return prepare_clean(log, first_dirty, now_ms)

    def commit_clean(self, tp: TopicPartition, plan: CleanPlan, now_ms: int) -> bool:
        log = self.logs.get(tp)
        if log is None or not commit_clean(log, plan, now_ms):
            return False
        self.first_dirty_offsets[tp] = plan.first_dirty_offset
        self.checkpoint()
        return True

    def run_cleaner(self, now_ms: int) -> int:
        """One synchronous cleaning pass over every compacted log; returns how many logs were cleaned."""
        cleaned = 0
        for tp in list(self.logs):
            plan = self.prepare_clean(tp, now_ms)
            if plan is not None and self.commit_clean(tp, plan, now_ms):
                cleaned += 1
        return cleaned


class _ClosedReplica(NamedTuple):
    """What the checkpoint files record of a replica being moved (closed, so every offset is flushed)."""

    directory: str
    recovery_point: int
    log_start_offset: int
    high_watermark: int
    high_watermark_set: bool
    closed: bool = False

    @classmethod
    def of(cls, log: Log, directory: str) -> _ClosedReplica:
        return cls(directory, log.log_end_offset, log.log_start_offset, log.high_watermark, log.high_watermark_set)


def _copy_partition_dir(source: str, destination: str) -> None:
    """Copy the files of a closed partition directory, each fsynced, then the new directory and its parent."""
    os.makedirs(destination)
    with os.scandir(source) as entries:
        names = [entry.name for entry in entries if entry.is_file()]
    for name in names:
        target = os.path.join(destination, name)
        shutil.copyfile(os.path.join(source, name), target)
        fsync_path(target)
    fsync_path(destination)
    fsync_path(os.path.dirname(destination))

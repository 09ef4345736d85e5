"""__share_group_state records (compatbroker.share.state_store): Kafka's layout, replay of snapshots, updates and
tombstones, and the coordinator key that places a share-partition's state."""
from __future__ import annotations

import struct
import uuid

from compatbroker.coordinator.offsets import java_string_hash
from compatbroker.protocol import decode_message, encode_message
from compatbroker.protocol.messages import ShareSnapshotValue, ShareUpdateKey, ShareUpdateValue
from compatbroker.share.partition import StateBatch
from compatbroker.share.state_store import (PersistedState, apply_record, coordinator_key, partition_for,
                                            snapshot_record)

TOPIC_ID = uuid.UUID(int=1)
KEY = ("g", TOPIC_ID, 3)


def test_coordinator_key_is_kafkas_text_and_places_the_state():
    assert coordinator_key(*KEY) == "g:AAAAAAAAAAAAAAAAAAAAAQ:3"
    assert partition_for(*KEY, 50) == abs(java_string_hash("g:AAAAAAAAAAAAAAAAAAAAAQ:3")) % 50


def test_snapshot_record_layout_and_replay():
    state = PersistedState(10, 2, 5, (StateBatch(10, 11, 0, 1), StateBatch(12, 12, 2, 1), StateBatch(13, 14, 4, 3)),
                           1234)
    key, value = snapshot_record(KEY, state, now_ms=99)
    assert struct.unpack_from(">h", key)[0] == 0 and struct.unpack_from(">h", value)[0] == 0
    decoded = decode_message(ShareSnapshotValue, 0, memoryview(value)[2:])
    assert (decoded.start_offset, decoded.state_epoch, decoded.leader_epoch) == (10, 2, 5)
    assert (decoded.create_timestamp, decoded.write_timestamp, decoded.delivery_complete_count) == (1234, 99, 3)
    states = {}
    assert apply_record(states, key, value) == KEY
    assert states[KEY] == state


def test_update_is_laid_over_the_snapshot_and_a_tombstone_deletes():
    states = {}
    apply_record(states, *snapshot_record(KEY, PersistedState(10, 0, 0, (StateBatch(10, 12, 0, 1),)), 0))
    update_key = struct.pack(">h", 1) + encode_message(ShareUpdateKey, 0, ShareUpdateKey(
        group_id="g", topic_id=TOPIC_ID, partition=3))
    update = ShareUpdateValue(snapshot_epoch=0, leader_epoch=1, start_offset=11, state_batches=[
        ShareUpdateValue.StateBatch(first_offset=13, last_offset=13, delivery_state=2, delivery_count=1)])
    apply_record(states, update_key, struct.pack(">h", 0) + encode_message(ShareUpdateValue, 0, update))
    assert states[KEY].start_offset == 11 and states[KEY].leader_epoch == 1
    assert states[KEY].batches == (StateBatch(10, 12, 0, 1), StateBatch(13, 13, 2, 1))
    apply_record(states, snapshot_record(KEY, None, 0)[0], None)
    assert KEY not in states


def test_unknown_record_types_are_skipped():
    assert apply_record({}, struct.pack(">h", 7) + b"\x00", b"") is None


async def test_records_every_key_has_superseded_are_pruned_and_replay_still_finds_the_latest(tmp_path, monkeypatch):
    from compatbroker.share import state_store
    from compatbroker.topic_names import SHARE_GROUP_STATE_TOPIC

    from ..handlers.helpers import make_broker
    monkeypatch.setattr(state_store, "PRUNE_EVERY_RECORDS", 4)
    broker = make_broker(tmp_path / "d")
    store = state_store.state_store_of(broker)
    partition = store.partition_of(KEY)
    other = next(("g", uuid.UUID(int=n), 0) for n in range(2, 10_000)
                 if store.partition_of(("g", uuid.UUID(int=n), 0)) == partition)
    for start in range(10):  # each write a snapshot: only the last of each key matters
        await store.write(KEY, PersistedState(start, 0, 0, ()))
    log = broker.get_log(SHARE_GROUP_STATE_TOPIC, partition)
    assert log.log_start_offset == 7  # the fourth and eighth writes pruned below the newest snapshot then
    await store.write(other, PersistedState(100, 0, 0, ()))
    for start in range(10, 13):
        await store.write(KEY, PersistedState(start, 0, 0, ()))
    assert log.log_start_offset == 10  # `other`'s only snapshot (offset 10) holds the start back
    broker.logs.shutdown()
    again = make_broker(tmp_path / "d")
    try:
        reloaded = state_store.state_store_of(again)
        assert (await reloaded.read(KEY)).start_offset == 12
        assert (await reloaded.read(other)).start_offset == 100
    finally:
        again.logs.shutdown()


async def test_a_node_stops_its_state_store_even_without_share_partitions_of_its_own(tmp_path):
    from compatbroker.share import state_store

    from ..handlers.helpers import make_broker
    broker = make_broker(tmp_path / "d")  # in a cluster another node's share partitions make this node's store
    store = state_store.state_store_of(broker)
    stopped = []

    async def stop():
        stopped.append(True)
    store.ownership.stop = stop
    assert broker.share_partitions is None
    await broker.shutdown()
    assert stopped == [True]

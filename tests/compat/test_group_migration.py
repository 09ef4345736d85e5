"""Online migration of a consumer group between the protocols (KIP-848's upgrade and downgrade, the broker's
group.consumer.migration.policy=bidirectional default): a classic group of confluent-kafka consumers
(group.protocol=classic) is replaced member by member with group.protocol=consumer members, then back, without a
committed offset lost and without a record read twice.

Each step starts the new member, waits until it is assigned, closes an old one, waits until the group is Stable and
of the expected type (a consumer group from the first consumer-protocol member until the last one leaves, as
confluent-kafka's describe_consumer_groups reports it), then produces records, waits until every member read those
of its partitions and commits them all, so a partition changing hands is resumed exactly where its last owner
committed.
"""
from __future__ import annotations

import pytest

from . import clients
from .broker_process import BrokerProcess
from .consumer_protocol import CONSUMER_PROTOCOL_SETTINGS, PARTITIONS, wait_for_group
from .groups import Members, each_read_its_own, split_among
from .test_groups import create_topic, expected, spread

pytestmark = pytest.mark.matrix(client="confluent-kafka", flow="groups_consumer_protocol")

UPGRADE = [("classic", "consumer")] * 3
DOWNGRADE = [("consumer", "classic")] * 3


@pytest.fixture
def migration_broker(tmp_path):
    with BrokerProcess(tmp_path / "data", CONSUMER_PROTOCOL_SETTINGS) as running:
        yield running


@pytest.fixture
def members(tmp_path):
    started = Members(tmp_path)
    yield started
    started.stop_all()


def test_classic_group_upgraded_member_by_member_and_back(reference, migration_broker, members, topic):
    confluent = clients.load_or_fail("confluent-kafka")
    bootstrap, group = migration_broker.bootstrap, f"group.{topic}"
    produced = 0

    def start(name, protocol):
        return members.start(confluent, bootstrap, topic, group, name, group_protocol=protocol)

    def settle_and_commit(current, step, kind):
        """The members share the partitions in a Stable group of `kind`, read the step's records and commit them; the
        group's offsets are the end offsets."""
        nonlocal produced
        members.wait_until(lambda: split_among(current, PARTITIONS), f"{step}: the members share the partitions")
        # Stable too: no member has a rebalance still to go through (a classic member rejoins after every group epoch
        # bump, and an eager one then reads again from the committed offsets).
        wait_for_group(bootstrap, group, lambda v: (v.group_type, v.state) == (kind, "STABLE") and v.assignments == {
            m.client_id: frozenset((topic, p) for p in m.assignment) for m in current},
            f"{step}: a Stable {kind} group, as its members see it")
        sent = spread(4, step)
        reference.produce(bootstrap, topic, sent)
        produced += 4
        members.wait_until(lambda: each_read_its_own(current, expected(sent)), f"{step}: each reads its partitions")
        for member in current:
            member.commit()
        committed = reference.group_offsets(bootstrap, group)
        assert committed == {(topic, p): produced for p in PARTITIONS}, f"{step}: committed {committed}"

    create_topic(reference, migration_broker, topic)
    current = [start(f"classic-{i}", "classic") for i in range(3)]
    settle_and_commit(current, "classic", "CLASSIC")

    for direction, steps in (("upgrade", UPGRADE), ("downgrade", DOWNGRADE)):
        for i, (old, new) in enumerate(steps):
            newcomer = start(f"{new}-{i}", new)
            members.wait_until(lambda: newcomer.assignment, f"{direction} step {i}: the newcomer is assigned")
            leaving = next(m for m in current if m.spec["group_protocol"] == old)
            leaving.close()  # a rolling replacement: the group is never empty, so it migrates online
            current = [m for m in current if m is not leaving] + [newcomer]
            # From the first consumer-protocol member on the group is a consumer group, until the last one leaves.
            kind = "CLASSIC" if all(m.spec["group_protocol"] == "classic" for m in current) else "CONSUMER"
            settle_and_commit(current, f"{direction}-{i}", kind)

    readers: dict[tuple[int, int], list[str]] = {}
    for member in members.started:
        for p, o, _ in member.records:
            readers.setdefault((p, o), []).append(member.name)
    twice = {po: names for po, names in sorted(readers.items()) if len(names) > 1}
    assert not twice, f"read more than once ((partition, offset): readers): {twice}"
    assert sorted(readers) == [(p, o) for p in sorted(PARTITIONS) for o in range(produced)], "records not read"

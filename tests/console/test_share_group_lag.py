"""A share group's lag on the console: the share-partition start offset and the lag DescribeShareGroupOffsets v1
answers (KIP-1226), not the end offset minus the start offset as if the start offset were a committed one."""
from __future__ import annotations

import asyncio

from compatbroker.coordinator import coordinator_of
from tests.console.conftest import http
from tests.handlers.helpers import call
from tests.handlers.share_group_helpers import GROUP, describe_offsets, heartbeat
from tests.handlers.test_share_fetch import produce, share_fetch
from tests.toolkit.test_control_api import running

ACCEPT, RELEASE = 1, 2  # ShareAcknowledge's acknowledge types


async def test_a_share_groups_page_shows_the_start_offset_and_kip_1226_lag(tmp_path):
    async with running(tmp_path) as (runtime, control):
        broker = runtime.broker
        await coordinator_of(broker).start()
        topic = broker.create_topic("t", 1)
        await heartbeat(broker, "a", 0, ["t"])
        await call(broker, 1, share_fetch(topic.topic_id))
        produce(broker, b"a", b"b", b"c")
        await call(broker, 1, share_fetch(topic.topic_id, epoch=1))
        # offset 0 released (available again: the start offset stays there), 1 and 2 delivered for good
        await call(broker, 1, share_fetch(topic.topic_id, epoch=2, acks={0: [(0, 0, [RELEASE]), (1, 2, [ACCEPT])]}))
        (described,) = (await describe_offsets(broker, {"t": [0]})).topics[0].partitions
        assert (described.start_offset, described.lag) == (0, 1)

        page = await asyncio.to_thread(http, f"{control.url}/groups/{GROUP}")
    assert page.status == 200, page.text
    assert "<th class=\"num\">Start offset</th>" in page.text and "KIP-1226" in page.text
    assert '<span class="big" id="total-lag">1</span>' in page.text  # not 3 (end offset 3 minus start offset 0)
    assert '<td class="num">0</td>\n<td class="num">3</td>\n<td class="num lag">1</td>' in page.text

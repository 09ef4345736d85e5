"""The controller's producer id blocks (Kafka's ProducerIdControlManager behind AllocateProducerIds): each node
claims blocks of 1000 ids from here, so no two nodes ever hand out the same producer id.

Before a block is handed over, the start of the following one is written to `<cluster data dir>/producer-id-block`
(`{"version": 1, "next_producer_id": N}`; a temp file, fsync, rename, fsync of the directory, in an executor), so
after a crash or a restart no id of a block handed out before is handed out again. A single node's cluster data
dir is its data dir: the file and its format are those earlier versions wrote. The file is read on the first
claim: an unreadable one raises ProducerIdsError then (nothing is allocated that could repeat an id), and a
failed write ProducerIdBlockUnavailable (the node answers COORDINATOR_LOAD_IN_PROGRESS, as Kafka's broker does
while it has no block). A node asks with a floor: the block starts at or above it (ids its data still knows).
"""
from __future__ import annotations

import asyncio
import logging

from ..producer_ids import (BLOCK_SIZE, PRODUCER_ID_BLOCK_FILE, ProducerIdBlockUnavailable,  # noqa: F401 - re-exported
                            read_next_block, write_next_block)

log = logging.getLogger(__name__)


class ProducerIdBlocks:
    """Hands out blocks of producer ids, each recorded durably before it is handed out."""

    def __init__(self, path: str):
        self.path = path
        self._next_block: int | None = None  # read on the first claim
        self._claiming = asyncio.Lock()

    async def allocate_block(self, floor: int = 0) -> range:
        """The next block of BLOCK_SIZE ids, starting at or above `floor`."""
        async with self._claiming:
            if self._next_block is None:
                self._next_block = read_next_block(self.path)
            start = max(self._next_block, floor)
            end = start + BLOCK_SIZE
            try:
                await asyncio.get_running_loop().run_in_executor(None, write_next_block, self.path, end)
            except OSError as exc:
                raise ProducerIdBlockUnavailable(f"cannot record producer id block {start}-{end - 1}: {exc}") from exc
            self._next_block = end
            log.info("handed out producer ids %d-%d", start, end - 1)
            return range(start, end)

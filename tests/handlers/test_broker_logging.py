"""What the broker's periodic work logs when a pass fails: an expected condition (the disk refused: OSError) is one
WARNING line without a traceback; anything else is a bug and keeps its traceback. Either way the next pass runs."""
from __future__ import annotations

import asyncio
import logging

PASSES_BOUND = 10_000  # loop turns of 1 ms passes: a generous bound, not a timing


async def run_until_two_failures(broker, job, caplog) -> list[logging.LogRecord]:
    broker._stopping = asyncio.Event()
    task = asyncio.create_task(broker._every(1, job))
    try:
        for _ in range(PASSES_BOUND):
            failures = [r for r in caplog.records if r.name == "compatbroker.broker" and r.levelno >= logging.WARNING]
            if len(failures) >= 2:
                return failures
            await asyncio.sleep(0.001)
        raise AssertionError("the periodic job did not fail twice")
    finally:
        broker._stopping.set()
        await task


async def test_an_os_error_in_a_periodic_pass_is_one_warning_line(broker, caplog):
    async def full_disk():
        raise OSError(28, "No space left on device")

    failures = await run_until_two_failures(broker, full_disk, caplog)
    assert [(r.levelname, r.exc_info) for r in failures[:2]] == [("WARNING", None)] * 2
    assert "No space left on device" in failures[0].getMessage()


async def test_a_bug_in_a_periodic_pass_keeps_its_traceback(broker, caplog):
    async def broken():
        raise KeyError("bug")

    failures = await run_until_two_failures(broker, broken, caplog)
    assert [r.levelname for r in failures[:2]] == ["ERROR"] * 2 and failures[0].exc_info is not None

"""The lag history behind the console's lag charts: every `interval_s` the sampler records each group's total lag
(the sum over its partitions whose lag is known, see `ControlOperations.group_lag`) and keeps the last `window_s` of
samples per group.

Sampling starts with the first console page served (`ensure_started`), so a broker nobody looks at through the
console does no such work. Memory stays bounded: at most `window_s / interval_s + 1` samples per group, at most
`max_groups` groups (groups that vanish are forgotten; beyond the limit new groups are not sampled). The sampler
runs on the broker's event loop as a task of the control service, so it reads the coordinators without locks.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_S = 2.0
DEFAULT_WINDOW_S = 600.0
DEFAULT_MAX_GROUPS = 1000


class LagHistory:
    def __init__(self, operations, *, interval_s: float = DEFAULT_INTERVAL_S, window_s: float = DEFAULT_WINDOW_S,
                 max_groups: int = DEFAULT_MAX_GROUPS, clock_ms: Callable[[], int] | None = None):
        self._operations = operations
        self.interval_s = interval_s
        self.window_ms = int(window_s * 1000)
        self._max_points = int(window_s / interval_s) + 1
        self._max_groups = max_groups
        self._clock_ms = clock_ms or (lambda: int(time.time() * 1000))
        self._samples: dict[str, deque[tuple[int, int]]] = {}
        self._task: asyncio.Task | None = None
        self._failing = False

    def now_ms(self) -> int:
        return self._clock_ms()

    def points(self, group: str) -> list[tuple[int, int]]:
        """(time ms, total lag) samples of `group` within the window, oldest first."""
        cutoff = self._clock_ms() - self.window_ms
        return [point for point in self._samples.get(group, ()) if point[0] >= cutoff]

    async def sample(self) -> None:
        """Record every group's total lag now (groups with no partition of known lag are left out)."""
        listed = [entry["group_id"] for entry in await self._operations.groups()]
        for gone in set(self._samples) - set(listed):
            del self._samples[gone]
        now = self._clock_ms()
        for group in listed:
            if group not in self._samples and len(self._samples) >= self._max_groups:
                continue
            lags = [entry["lag"] for entry in await self._operations.group_lag(group) if entry["lag"] is not None]
            if lags:
                self._samples.setdefault(group, deque(maxlen=self._max_points)).append((now, sum(lags)))

    def ensure_started(self) -> None:
        """Start sampling on the running loop unless it runs already."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="console-lag-history")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            try:
                await self.sample()
                self._failing = False
            except Exception:  # noqa: BLE001 - a bug here must not stop sampling; logged once per streak
                if not self._failing:
                    log.exception("sampling consumer lag for the console failed")
                self._failing = True
            await asyncio.sleep(self.interval_s)

"""The console's lag sampler (total lag per group over a bounded window, groups that vanish forgotten), and how
its pages show values and draw the lag chart."""
from __future__ import annotations

from compatbroker.toolkit.control.console.lag_history import LagHistory
from compatbroker.toolkit.control.console import views
from tests.async_tests import async_test


class FakeOperations:
    def __init__(self):
        self.lags = {"a": [5, 3], "b": [None]}

    async def groups(self):
        return [{"group_id": group} for group in self.lags]

    async def group_lag(self, group):
        return [{"lag": lag} for lag in self.lags[group]]


@async_test
async def test_samples_sum_each_groups_lag_and_keep_only_the_window():
    now = [1_000_000]
    operations = FakeOperations()
    history = LagHistory(operations, interval_s=2.0, window_s=10.0, clock_ms=lambda: now[0])
    for step in range(20):
        operations.lags["a"] = [20 - step, 0]
        await history.sample()
        now[0] += 2000
    points = history.points("a")
    assert len(history._samples["a"]) == 6  # window / interval + 1, whatever the run's length
    assert [lag for _, lag in points] == [5, 4, 3, 2, 1]  # the oldest of the six is now outside the window
    assert history.points("b") == []  # no committed offsets: nothing to chart


@async_test
async def test_groups_that_vanish_are_forgotten_and_the_group_count_is_bounded():
    operations = FakeOperations()
    operations.lags = {f"g{index}": [1] for index in range(5)}
    history = LagHistory(operations, max_groups=3)
    await history.sample()
    assert len(history._samples) == 3
    operations.lags = {"g0": [1]}
    await history.sample()
    assert set(history._samples) == {"g0"}


def test_the_chart_runs_from_the_first_sample_to_now_with_zero_at_the_bottom():
    chart = views.lag_chart([(100_000, 10), (190_000, 4), (280_000, 0)], now_ms=280_000, window_ms=600_000)
    first, middle, last = chart["polyline"].split()
    assert first == f"{chart['left']:.1f},{chart['top']:.1f}"
    x, y = (chart["left"] + chart["right"]) / 2, chart["top"] + 0.6 * (chart["bottom"] - chart["top"])
    assert middle == f"{x:.1f},{y:.1f}"  # halfway in time, lag 4 of 10
    assert last == f"{chart['right']:.1f},{chart['bottom']:.1f}"
    assert (chart["top_lag"], chart["last_lag"], chart["span"], chart["window"]) == (10, 0, "3 min", "10 min")
    young = views.lag_chart([(0, 5)], now_ms=10_000, window_ms=600_000)
    assert young["span"] == "60 s"  # at least a minute, so that one sample is no full-width line


def test_values_show_as_text_pretty_json_or_hex():
    assert views.show_bytes(b'{"a":1}', "json")["text"] == '{\n  "a": 1\n}'
    assert views.show_bytes(b"plain", "json")["note"] == "not JSON; shown as text"
    assert views.show_bytes(b"AB\x00", "hex")["text"] == "00000000  41 42 00" + " " * 41 + "AB."
    assert views.show_bytes(None, "text")["null"] is True
    assert views.human_bytes(1536) == "1.5 KiB" and views.human_bytes(12) == "12 B"
    assert views.parse_time("2026-01-31T13:45:00") == views.parse_time("1769867100000") == 1769867100000


def test_a_long_json_value_is_cut_as_a_long_text_is():
    value = b"[" + b",".join(b"%d" % n for n in range(40_000)) + b"]"
    shown = views.show_bytes(value, "json")
    assert shown["text"].startswith("[\n  0,\n  1,") and len(shown["text"]) == 64 * 1024
    assert shown["note"] == f"first 64.0 KiB of {views.human_bytes(len(value))}"

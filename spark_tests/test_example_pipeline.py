"""examples/spark_pipeline end to end: events produced with kafka-python, the Spark job counting them per page and
minute of event time behind a watermark, its results read back with a Python consumer. Two runs of the job on one
checkpoint: the second goes on with the first's windows and watermark, and drops a view that came too late."""
from __future__ import annotations

import importlib.util
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "spark_pipeline"
T0 = datetime(2026, 1, 1, 10, 0, tzinfo=timezone.utc)


def example(name: str):
    """A module of the example, imported from its file (the example is a directory of scripts, not a package)."""
    module_name = f"spark_pipeline_{name}"
    if module_name not in sys.modules:
        spec = importlib.util.spec_from_file_location(module_name, EXAMPLE / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
    return sys.modules[module_name]


def view(user: str, page: str, minute: int, second: int) -> dict:
    return example("events").event(user, page, T0 + timedelta(minutes=minute, seconds=second))


def result(page: str, minute: int, views: int, users: int) -> dict:
    start = (T0 + timedelta(minutes=minute)).strftime("%Y-%m-%dT%H:%M:%SZ")
    end = (T0 + timedelta(minutes=minute + 1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"key": f"{page}|{start}", "page": page, "window_start": start, "window_end": end, "views": views,
            "users": users}


@pytest.fixture
def topics(broker, topic):
    source, sink = f"{topic}.views", f"{topic}.per-minute"
    broker.create_topic(source, 2)
    broker.create_topic(sink, 1)
    return source, sink


def test_page_views_per_minute(spark, kafka, topics, tmp_path):
    source, sink = topics
    events, job, results = example("events"), example("job"), example("results")

    def run_job():
        query = job.start(spark, kafka.bootstrap, source=source, sink=sink, checkpoint=str(tmp_path / "checkpoint"),
                          once=True)
        assert query.awaitTermination(180), "the job did not finish"
        assert query.exception() is None

    def written():
        return sorted(results.read_results(kafka.bootstrap, sink), key=lambda r: r["key"])

    # Minutes 0 and 1, out of order within them; a view at 2:45 moves the watermark (30 s) to 2:15.
    events.send(kafka.bootstrap, source, [
        view("u1", "/home", 0, 5), view("u2", "/home", 0, 20), view("u1", "/cart", 0, 30),
        view("u2", "/cart", 1, 40), view("u1", "/home", 0, 50), view("u3", "/cart", 1, 55),
        view("u3", "/home", 1, 10), view("u1", "/home", 2, 45)])
    run_job()
    first = [result("/cart", 0, 1, 1), result("/home", 0, 3, 2), result("/cart", 1, 2, 2), result("/home", 1, 1, 1)]
    assert written() == sorted(first, key=lambda r: r["key"])

    # A view of minute 0, long closed, is dropped; 4:10 moves the watermark to 3:40, which closes minute 2 only.
    events.send(kafka.bootstrap, source, [
        view("u9", "/home", 0, 40), view("u2", "/cart", 2, 20), view("u4", "/home", 3, 30),
        view("u5", "/home", 4, 10)])
    run_job()
    second = first + [result("/cart", 2, 1, 1), result("/home", 2, 1, 1)]
    assert written() == sorted(second, key=lambda r: r["key"])

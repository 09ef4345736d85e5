"""Reading what `/metrics` says: a scrape parsed into {(name, labels): value}, and waiting for a condition on it."""
from __future__ import annotations

import time
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never through a proxy from the environment
WAIT_S = 30.0


class Scrape:
    """One scrape: samples by name and labels. `value(name, **labels)` is one sample (0 when absent); `total(name,
    **labels)` sums the samples whose labels include those given."""

    def __init__(self, text: str):
        self.text = text
        self.samples: dict[tuple[str, frozenset], float] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                self.samples[(sample.name, frozenset(sample.labels.items()))] = sample.value

    def value(self, name: str, **labels) -> float:
        return self.samples.get((name, frozenset((key, str(value)) for key, value in labels.items())), 0.0)

    def total(self, name: str, **labels) -> float:
        wanted = {(key, str(value)) for key, value in labels.items()}
        return sum(value for (sample, found), value in self.samples.items() if sample == name and wanted <= found)

    def labels_of(self, name: str) -> list[dict[str, str]]:
        return [dict(found) for (sample, found) in self.samples if sample == name]


def scrape(url: str) -> Scrape:
    with _OPENER.open(url, timeout=WAIT_S) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return Scrape(response.read().decode())


def wait_for(url: str, condition, what: str) -> Scrape:
    """Scrape until `condition(scrape)` holds, for up to WAIT_S (the broker counts on its own loop)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        found = scrape(url)
        if condition(found):
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"metrics never showed {what}")
        time.sleep(0.02)  # polling interval of the condition, not a synchronisation

"""`compatbroker serve --metrics-listen HOST:PORT`: the Prometheus endpoint beside the broker (its URL printed
after the listening line), and a malformed address refused as a bad configuration (exit 2)."""
from __future__ import annotations

import re
import urllib.request

from tests.server.test_serve import serve  # noqa: F401 (the fixture)


def test_metrics_listen_serves_prometheus_text(serve, tmp_path):  # noqa: F811
    broker = serve("--listen", "127.0.0.1:0", "--data-dir", str(tmp_path / "data"), "--metrics-listen",
                   "127.0.0.1:0")
    broker.listening()
    line = broker.process.stdout.readline()  # printed with the listening line (already buffered); "" if it died
    match = re.fullmatch(r"compatbroker metrics on (http://127\.0\.0\.1:\d+/metrics)\n", line)
    assert match, (line, broker.stderr())
    with urllib.request.urlopen(match.group(1), timeout=30) as answer:
        text = answer.read().decode()
    assert answer.status == 200 and "# TYPE " in text
    assert broker.stop() == 0


def test_a_malformed_metrics_address_is_a_bad_configuration(serve, tmp_path):  # noqa: F811
    broker = serve("--data-dir", str(tmp_path / "data"), "--metrics-listen", "nowhere")
    assert broker.exit_status() == 2
    stderr = broker.stderr()
    assert stderr.startswith("compatbroker: --metrics-listen: ") and stderr.count("\n") == 1

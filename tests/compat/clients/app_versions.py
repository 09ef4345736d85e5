"""The installed versions of the matrix's applications (catalog entries "faust", "rsyslog", "syslog-ng"), which
have no adapter: tests/compat/apps/ runs them."""
from __future__ import annotations

import subprocess


def version(name: str) -> str | None:
    from ..apps import faust_worker, log_shippers
    if name == "faust":
        return faust_worker.faust_version()
    found = {"rsyslog": log_shippers.rsyslog_version, "syslog-ng": log_shippers.syslog_ng_version}[name]()
    driver = {"rsyslog": "omkafka/imkafka", "syslog-ng": "kafka-c()"}[name]
    return found and f"{found}, {driver}, librdkafka {_librdkafka() or '?'}"


def _librdkafka() -> str | None:
    """Debian's librdkafka1, which both daemons' Kafka modules link."""
    try:
        done = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "librdkafka1"], capture_output=True,
                              text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None

"""Where Spark's Kafka connector comes from, and a SparkSession that has it.

PySpark from PyPI ships without the connector: `spark-sql-kafka-0-10` (the "kafka" source and sink) and what it
needs at run time (`spark-token-provider-kafka-0-10`, `kafka-clients`, `commons-pool2`) live in Maven repositories
only. They are taken, in this order, from

1. `COMPATBROKER_SPARK_JARS`: comma-separated paths of jar files built for the installed PySpark, put on
   `spark.jars`. A named file that does not exist is an error, not a reason to skip;
2. a Maven repository that answers for `org.apache.spark:spark-sql-kafka-0-10_<scala>:<pyspark version>` (Maven
   Central, or the one `COMPATBROKER_SPARK_REPOSITORY` names), through `spark.jars.packages`: Spark's own resolver
   then downloads the connector and its dependencies into ~/.ivy2.

When neither is there, `find_connector` raises `ConnectorUnavailable` saying what to do, and the Spark tests skip
with that text.
"""
from __future__ import annotations

import glob
import os
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

JARS_ENV = "COMPATBROKER_SPARK_JARS"
REPOSITORY_ENV = "COMPATBROKER_SPARK_REPOSITORY"
MAVEN_CENTRAL = "https://repo1.maven.org/maven2"
PROBE_TIMEOUT_S = 5.0


class ConnectorUnavailable(Exception):
    """Neither jars nor a Maven repository: the Spark tests cannot run here (the message says how to fix it)."""


class ConnectorMisconfigured(Exception):
    """COMPATBROKER_SPARK_JARS names files that are not there."""


@dataclass(frozen=True)
class Connector:
    conf: Mapping[str, str]  # SparkSession settings that put the connector on the class path
    source: str              # where it comes from, for reports
    jars: tuple[str, ...] = field(default=())


def pyspark_build() -> tuple[str, str]:
    """(PySpark version, Scala binary version of its jars), e.g. ("4.3.0", "2.13")."""
    try:
        import pyspark
    except ImportError:
        raise ConnectorUnavailable("PySpark is not installed: pip install -e '.[test]' (or bash tests/run.sh)")

    jar_dir = os.path.join(os.path.dirname(pyspark.__file__), "jars")
    libraries = glob.glob(os.path.join(jar_dir, "scala-library-*.jar"))
    if not libraries:
        raise ConnectorUnavailable(f"no scala-library jar in {jar_dir}: is PySpark installed completely?")
    full = os.path.basename(libraries[0]).removeprefix("scala-library-").removesuffix(".jar")
    return pyspark.__version__, ".".join(full.split(".")[:2])


def maven_coordinates(version: str, scala: str) -> str:
    return f"org.apache.spark:spark-sql-kafka-0-10_{scala}:{version}"


def find_connector(environ: Mapping[str, str] = os.environ,
                   probe: Callable[[str], str | None] | None = None,
                   build: Callable[[], tuple[str, str]] = pyspark_build) -> Connector:
    """The connector for the installed PySpark (`build()`: its version and Scala version). `probe(url)` returns
    None when the URL answers, else why not."""
    named = environ.get(JARS_ENV, "").strip()
    if named:
        return _from_jars(named)
    version, scala = build()
    repository = environ.get(REPOSITORY_ENV, "").strip().rstrip("/") or MAVEN_CENTRAL
    artifact = f"spark-sql-kafka-0-10_{scala}"
    pom = f"{repository}/org/apache/spark/{artifact}/{version}/{artifact}-{version}.pom"
    problem = (probe or _probe)(pom)
    if problem is not None:
        raise ConnectorUnavailable(
            f"Spark's Kafka connector is not available: {JARS_ENV} is not set and {pom} {problem}. "
            f"Set {JARS_ENV} to the comma-separated paths of {artifact}-{version}.jar, "
            f"spark-token-provider-kafka-0-10_{scala}-{version}.jar, kafka-clients and commons-pool2 jars, or run "
            f"where {repository} is reachable ({REPOSITORY_ENV} names another Maven repository).")
    conf = {"spark.jars.packages": maven_coordinates(version, scala)}
    if repository != MAVEN_CENTRAL:
        conf["spark.jars.repositories"] = repository
    return Connector(conf=conf, source=f"{maven_coordinates(version, scala)} from {repository}")


def _from_jars(named: str) -> Connector:
    jars = tuple(os.path.abspath(os.path.expanduser(path.strip())) for path in named.split(",") if path.strip())
    missing = [path for path in jars if not os.path.isfile(path)]
    if missing:
        raise ConnectorMisconfigured(f"{JARS_ENV} names jars that do not exist: {', '.join(missing)}")
    names = ", ".join(os.path.basename(path) for path in jars)
    return Connector(conf={"spark.jars": ",".join(jars)}, source=f"{JARS_ENV}: {names}", jars=jars)


def _probe(url: str) -> str | None:
    request = urllib.request.Request(url, method="HEAD")
    try:
        with urllib.request.urlopen(request, timeout=PROBE_TIMEOUT_S):
            return None
    except urllib.error.HTTPError as exc:
        return f"answered HTTP {exc.code}"
    except (urllib.error.URLError, OSError) as exc:
        return f"could not be reached ({getattr(exc, 'reason', exc)})"


def session_builder(connector: Connector, app_name: str):
    """A SparkSession builder on `local[2]` with the connector, kept on the loopback interface (no web UI), times
    shown in UTC, and two shuffle partitions (the default 200 only costs time on small test data)."""
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master("local[2]").appName(app_name)
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.sql.shuffle.partitions", "2"))
    for key, value in connector.conf.items():
        builder = builder.config(key, value)
    return builder

"""Finding Spark's Kafka connector: named jars, a Maven repository, or a skip reason that says what to do. These
tests need neither Spark nor the connector, so they run everywhere."""
from __future__ import annotations

import pytest

from .connector import (JARS_ENV, MAVEN_CENTRAL, REPOSITORY_ENV, ConnectorMisconfigured, ConnectorUnavailable,
                        find_connector)

POM = ("org/apache/spark/spark-sql-kafka-0-10_2.13/4.3.0/spark-sql-kafka-0-10_2.13-4.3.0.pom")


def build():
    return "4.3.0", "2.13"


def unreachable(url):
    raise AssertionError(f"no repository may be asked when jars are named, asked {url}")


def test_named_jars_go_on_spark_jars(tmp_path):
    jars = [tmp_path / "spark-sql-kafka-0-10_2.13-4.3.0.jar", tmp_path / "kafka-clients-3.9.2.jar"]
    for jar in jars:
        jar.write_bytes(b"PK")
    found = find_connector({JARS_ENV: f" {jars[0]} ,{jars[1]},"}, probe=unreachable, build=build)
    assert found.conf == {"spark.jars": f"{jars[0]},{jars[1]}"}
    assert found.jars == (str(jars[0]), str(jars[1]))
    assert found.source == f"{JARS_ENV}: spark-sql-kafka-0-10_2.13-4.3.0.jar, kafka-clients-3.9.2.jar"


def test_a_named_jar_that_is_missing_is_an_error_not_a_skip(tmp_path):
    with pytest.raises(ConnectorMisconfigured, match="missing.jar"):
        find_connector({JARS_ENV: str(tmp_path / "missing.jar")}, probe=unreachable, build=build)


def test_maven_central_when_it_has_the_connector_of_this_pyspark():
    asked = []
    found = find_connector({}, probe=lambda url: asked.append(url), build=build)
    assert asked == [f"{MAVEN_CENTRAL}/{POM}"]
    assert found.conf == {"spark.jars.packages": "org.apache.spark:spark-sql-kafka-0-10_2.13:4.3.0"}


def test_another_repository_is_passed_to_spark():
    asked = []
    found = find_connector({REPOSITORY_ENV: "https://maven.example/repo/"}, probe=lambda url: asked.append(url),
                           build=build)
    assert asked == [f"https://maven.example/repo/{POM}"]
    assert found.conf == {"spark.jars.packages": "org.apache.spark:spark-sql-kafka-0-10_2.13:4.3.0",
                          "spark.jars.repositories": "https://maven.example/repo"}


def test_without_jars_or_repository_the_reason_says_what_to_set():
    with pytest.raises(ConnectorUnavailable) as raised:
        find_connector({}, probe=lambda url: "could not be reached (no network)", build=build)
    reason = str(raised.value)
    assert f"{MAVEN_CENTRAL}/{POM} could not be reached (no network)" in reason
    assert JARS_ENV in reason and "spark-sql-kafka-0-10_2.13-4.3.0.jar" in reason and REPOSITORY_ENV in reason

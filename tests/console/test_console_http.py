"""The console over plain HTTP: every page answers HTML (and the JSON routes still answer JSON), hostile record
values and client ids are escaped, unknown topics and groups answer 404 and bad forms or queries 400 with a
readable reason."""
from __future__ import annotations

import json
import time
from urllib.parse import quote

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.structs import OffsetAndMetadata, TopicPartition

from tests.console.conftest import http

HOSTILE = "<script>alert('owned')</script>"
ESCAPED = "&lt;script&gt;alert(&#39;owned&#39;)&lt;/script&gt;"
HOSTILE_CLIENT = '<img src=x onerror="alert(1)">'


@pytest.fixture(scope="module")
def stocked(broker):
    """Topic `orders` (2 partitions) with 5 records in partition 0 (JSON values, one hostile; timestamps one
    minute apart, the last a minute ago) and group `billing` that committed offset 2 of them."""
    broker.create_topic("orders", 2)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, client_id=HOSTILE_CLIENT)
    base = (int(time.time()) - 6 * 60) * 1000
    for index in range(5):
        value = json.dumps({"n": index, "note": HOSTILE if index == 1 else "fine"}).encode()
        producer.send("orders", key=f"key-{index}".encode(), value=value, partition=0,
                      headers=[("trace", HOSTILE.encode())], timestamp_ms=base + index * 60_000).get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id="billing",
                             enable_auto_commit=False)
    consumer.commit({TopicPartition("orders", 0): OffsetAndMetadata(2, "", -1)})
    consumer.close()
    return broker.control_url, base


PAGES = ["/", "/topics", "/topics/orders", "/topics/orders/records", "/topics/orders/records?format=json",
         "/topics/orders/records?format=hex&partition=1", "/groups", "/groups/billing", "/requests", "/faults",
         "/clients"]


@pytest.mark.parametrize("path", PAGES)
def test_every_page_answers_html_with_a_policy_that_runs_only_our_script(stocked, path):
    url, _ = stocked
    answer = http(url + path)
    assert answer.status == 200, answer.text
    assert answer.headers["Content-Type"] == "text/html; charset=utf-8"
    assert answer.headers["Connection"] == "close"
    assert "script-src 'self'" in answer.headers["Content-Security-Policy"]
    assert answer.text.startswith("<!doctype html>") and '<nav class="bar">' in answer.text
    fragment = http(url + path + ("&" if "?" in path else "?") + "fragment=1")
    assert fragment.status == 200 and "<nav" not in fragment.text and "<html" not in fragment.text


@pytest.mark.parametrize("name, content_type", [("console.css", "text/css; charset=utf-8"),
                                                ("console.js", "text/javascript; charset=utf-8")])
def test_the_assets_ship_in_the_package(stocked, name, content_type):
    answer = http(f"{stocked[0]}/static/{name}")
    assert (answer.status, answer.headers["Content-Type"]) == (200, content_type)
    assert len(answer.body) > 500
    assert http(f"{stocked[0]}/static/../operations.py").status == 404
    assert http(f"{stocked[0]}/static/absent.js").status == 404


def test_scripts_without_accept_html_still_get_the_json_routes(stocked):
    url, _ = stocked
    for path in ("/topics", "/groups", "/requests", "/faults"):
        answer = http(url + path, html=False)
        assert answer.headers["Content-Type"] == "application/json", path
        json.loads(answer.body)
    assert "orders" in [topic["name"] for topic in json.loads(http(url + "/topics", html=False).body)]
    # a JSON body posted to the form route is no form: still the JSON endpoint's answer, as before
    refused = http(url + "/faults", method="POST", html=False, body=b"{}", content_type="application/json")
    assert refused.status == 405 and json.loads(refused.body) == {"error": "POST is not allowed on /faults"}
    assert http(url + "/nowhere", html=False).status == 404
    # routes only the JSON API has stay JSON even for a browser
    assert http(url + "/status").headers["Content-Type"] == "application/json"


def test_hostile_record_values_headers_and_client_ids_are_escaped(stocked):
    url, _ = stocked
    for fmt in ("text", "json"):
        page = http(f"{url}/topics/orders/records?format={fmt}").text
        assert HOSTILE not in page and "<script>alert" not in page
        assert ESCAPED in page or "&lt;script&gt;alert(&#39;owned&#39;)&lt;/script&gt;" in page
    hexed = http(f"{url}/topics/orders/records?format=hex").text
    assert "3c 73 63 72 69 70 74 3e" in hexed and "<script>alert" not in hexed
    log = http(f"{url}/requests").text
    assert HOSTILE_CLIENT not in log and "&lt;img src=x onerror=&#34;alert(1)&#34;&gt;" in log


def test_the_record_browser_shows_values_from_an_offset_or_from_a_time(stocked):
    url, base = stocked
    page = http(f"{url}/topics/orders/records?offset=3").text
    assert "key-3" in page and "key-4" in page and "key-2" not in page
    iso = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime((base + 2 * 60_000) / 1000))
    by_time = http(f"{url}/topics/orders/records?timestamp={quote(iso)}&limit=1").text
    assert "key-2" in by_time and "key-3" not in by_time and "Next records from offset 3" in by_time
    assert "key-4" in http(f"{url}/topics/orders/records?timestamp={base + 4 * 60_000}").text
    pretty = http(f"{url}/topics/orders/records?format=json&offset=0&limit=1").text
    assert '{\n  &#34;n&#34;: 0,\n  &#34;note&#34;: &#34;fine&#34;\n}' in pretty


def test_the_topic_page_shows_offsets_size_and_configs(stocked):
    page = http(f"{stocked[0]}/topics/orders").text
    assert '<td class="num">0</td><td class="num">5</td><td class="num">5</td>' in page  # start, end, records
    assert "cleanup.policy" in page and "retention.ms" in page


def test_the_group_page_shows_the_lag_per_partition(stocked):
    page = http(f"{stocked[0]}/groups/billing").text
    assert '<span class="big" id="total-lag">3</span>' in page
    assert '<td class="num">2</td>\n<td class="num">5</td>\n<td class="num lag">3</td>' in page


@pytest.mark.parametrize("path, reason", [
    ("/topics/absent", "no topic absent"),
    ("/topics/absent/records", "no topic absent"),
    ("/topics/orders/records?partition=7", "topic orders has no partition 7 (it has 2)"),
    ("/groups/absent", "no group absent"),
    ("/groups/a%2Fb", "no group a/b"),
    ("/nowhere/at/all", "no console page at /nowhere/at/all"),
    ("/topics/orders/records/more", "no console page at /topics/orders/records/more"),
])
def test_unknown_topics_groups_and_pages_answer_404_saying_so(stocked, path, reason):
    answer = http(stocked[0] + path)
    assert answer.status == 404
    assert f'<p class="alert error" id="error-message">{reason}</p>' in answer.text


@pytest.mark.parametrize("query, reason", [
    ("offset=abc", "offset must be a whole number, got &#39;abc&#39;"),
    ("format=xml", "format must be one of text, json, hex, got &#39;xml&#39;"),
    ("timestamp=yesterday", "timestamp &#39;yesterday&#39; is neither epoch milliseconds nor an ISO 8601 time"),
    ("limit=0", "limit must be at least 1, got 0"),
])
def test_a_bad_record_query_answers_400_with_the_reason(stocked, query, reason):
    answer = http(f"{stocked[0]}/topics/orders/records?{query}")
    assert answer.status == 400 and reason in answer.text


@pytest.mark.parametrize("form, reason", [
    ({"action": "error", "api": "Produce", "error": "NOT_AN_ERROR", "count": "1"},
     "unknown error &#39;NOT_AN_ERROR&#39;: use Kafka&#39;s name"),
    ({"action": "error", "api": "", "error": "NOT_LEADER_OR_FOLLOWER"}, "choose the API whose requests get the error"),
    ({"action": "error", "api": "Produc", "error": "NOT_LEADER_OR_FOLLOWER"}, "unknown API &#39;Produc&#39;"),
    ({"action": "latency", "api": "Fetch", "ms": "soon"}, "ms must be a whole number, got &#39;soon&#39;"),
    ({"action": "drop", "after": "-1"}, "after must be at least 0, got -1"),
    ({"action": "error", "api": "Produce", "error": "NOT_LEADER_OR_FOLLOWER", "count": "0"},
     "count must be at least 1, got 0"),
    ({"action": "explode"}, "unknown action &#39;explode&#39;: use error, latency, drop or clear"),
])
def test_a_bad_fault_form_answers_400_with_a_readable_message_and_adds_no_rule(stocked, form, reason):
    url, _ = stocked
    answer = http(url + "/faults", method="POST", form=form)
    assert answer.status == 400
    assert answer.headers["Content-Type"] == "text/html; charset=utf-8"
    assert f'<p class="alert error" id="form-error">{reason}' in answer.text
    assert json.loads(http(url + "/faults", html=False).body) == {"errors": [], "latency": [], "drops": []}


def test_fault_forms_add_rules_that_the_page_and_the_json_route_show_and_clear_removes_them(stocked):
    url, _ = stocked
    added = http(url + "/faults", method="POST", form={"action": "error", "api": "Metadata",
                                                      "error": "BROKER_NOT_AVAILABLE", "count": "2", "topic": ""})
    assert added.status == 200
    assert "The next 2 Metadata requests: answered BROKER_NOT_AVAILABLE instead of served." in added.text
    http(url + "/faults", method="POST", form={"action": "latency", "api": "", "ms": "5", "count": ""})
    assert json.loads(http(url + "/faults", html=False).body) == {
        "errors": [{"api": "Metadata", "error": "BROKER_NOT_AVAILABLE", "remaining": 2, "topic": None}],
        "latency": [{"api": None, "ms": 5, "remaining": None}], "drops": []}
    assert "<td>latency</td><td>every API</td><td>5 ms</td><td>until cleared</td>" in http(url + "/faults").text
    cleared = http(url + "/faults", method="POST", form={"action": "clear"})
    assert cleared.status == 200 and 'id="no-rules"' in cleared.text
    assert json.loads(http(url + "/faults", html=False).body) == {"errors": [], "latency": [], "drops": []}


def test_the_request_log_shows_latency_once_answered(stocked):
    url, _ = stocked
    entries = json.loads(http(url + "/requests", html=False).body)
    answered = [entry for entry in entries if entry.get("latency_ms") is not None]
    assert answered and all(entry["latency_ms"] >= 0 for entry in answered)
    assert " ms</td>" in http(url + "/requests").text


def test_the_clients_page_says_what_it_shows_without_telemetry(stocked):
    page = http(stocked[0] + "/clients").text
    assert "Client telemetry (KIP-714)" in page
    assert "No client has pushed metrics yet" in page or "keeps no client telemetry" in page


def test_a_group_id_with_a_slash_and_markup_links_to_its_own_page(stocked, broker):
    url, _ = stocked
    group = "team/<b>x</b>"
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=group, enable_auto_commit=False)
    consumer.commit({TopicPartition("orders", 0): OffsetAndMetadata(4, "", -1)})
    consumer.close()
    listing = http(url + "/groups").text
    href = "/groups/" + quote(group, safe="")
    assert f'<a href="{href}">team/&lt;b&gt;x&lt;/b&gt;</a>' in listing
    page = http(url + href)
    assert page.status == 200 and '<span class="big" id="total-lag">1</span>' in page.text


def test_the_request_log_can_show_one_api_and_names_a_bad_one(stocked):
    url, _ = stocked
    page = http(url + "/requests?api=Produce").text
    assert "<td>Produce</td>" in page and "<td>Metadata</td>" not in page
    bad = http(url + "/requests?api=Nonsense")
    assert bad.status == 400 and "unknown API &#39;Nonsense&#39;" in bad.text


def test_a_page_of_big_records_stops_after_about_four_mebibytes(stocked, broker):
    broker.create_topic("big", 1)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, max_request_size=2 << 20)
    for index in range(6):
        producer.send("big", value=bytes([65 + index]) * 900_000, partition=0).get(timeout=30)
    producer.close()
    page = http(f"{stocked[0]}/topics/big/records?limit=50").text
    assert page.count('<td class="value-cell">') == 5  # 5 x 900 kB reach 4 MiB: the sixth waits for the next page
    assert "Next records from offset 5" in page and "first 64.0 KiB of 878.9 KiB" in page


def test_big_headers_count_toward_a_pages_four_mebibytes(stocked, broker):
    broker.create_topic("big-headers", 1)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, max_request_size=2 << 20)
    for index in range(6):
        producer.send("big-headers", value=b"v%d" % index, headers=[("blob", bytes([65 + index]) * 900_000)],
                      partition=0).get(timeout=30)
    producer.close()
    page = http(f"{stocked[0]}/topics/big-headers/records?limit=50").text
    assert page.count('<td class="value-cell">') == 5 and "Next records from offset 5" in page


def test_a_fault_form_posted_from_another_site_is_refused(stocked):
    url, _ = stocked
    form = {"action": "error", "api": "Produce", "error": "NOT_LEADER_OR_FOLLOWER"}
    refused = http(url + "/faults", method="POST", form=form, headers={"Origin": "http://evil.example"})
    assert refused.status == 403 and "a form posted from http://evil.example is refused" in refused.text
    sandboxed = http(url + "/faults", method="POST", form=form, headers={"Origin": "null"})
    assert sandboxed.status == 403
    assert json.loads(http(url + "/faults", html=False).body)["errors"] == []
    same_site = http(url + "/faults", method="POST", form={"action": "clear"}, headers={"Origin": url})
    assert same_site.status == 200

"""A Python client of the control endpoint (standard library only; it does not load the broker).

Each method is one HTTP request and answers what `ControlOperations` answers in the broker, with record keys,
values and header values decoded back to bytes; a refused request raises `ControlError`.
"""
from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from urllib.parse import urlencode

from . import ControlError

DEFAULT_TIMEOUT_S = 30.0
# The endpoint is local to the test run: never send its requests through an HTTP proxy from the environment.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def control_url(address: str) -> str:
    """`http://HOST:PORT` for HOST:PORT or a URL."""
    address = address.strip().rstrip("/")
    return address if address.startswith(("http://", "https://")) else f"http://{address}"


class ControlClient:
    def __init__(self, address: str, *, timeout_s: float = DEFAULT_TIMEOUT_S):
        self.url = control_url(address)
        self.timeout_s = timeout_s

    def __repr__(self):
        return f"ControlClient({self.url!r})"

    # --- faults ---------------------------------------------------------------------------------------------------

    def inject_error(self, api, error, count: int | None = 1, topic: str | None = None) -> dict:
        return self._call("POST", "/faults/errors", body={"api": api, "error": error, "count": count,
                                                          "topic": topic})

    def inject_latency(self, api, ms: float, count: int | None = None) -> dict:
        return self._call("POST", "/faults/latency", body={"api": api, "ms": ms, "count": count})

    def drop_connections_after(self, after: int = 0, api=None, count: int | None = 1) -> dict:
        return self._call("POST", "/faults/drops", body={"after": after, "api": api, "count": count})

    def clear_faults(self) -> dict:
        return self._call("DELETE", "/faults")

    def faults(self) -> dict:
        return self._call("GET", "/faults")

    # --- availability ---------------------------------------------------------------------------------------------

    def down(self) -> dict:
        return self._call("POST", "/down")

    def up(self) -> dict:
        return self._call("POST", "/up")

    def status(self) -> dict:
        return self._call("GET", "/status")

    # --- nodes of a cluster ---------------------------------------------------------------------------------------

    def nodes(self) -> list[dict]:
        return self._call("GET", "/nodes")

    def stop_node(self, node_id: int) -> dict:
        return self._call("POST", "/nodes/stop", body={"node_id": node_id})

    def start_node(self, node_id: int) -> dict:
        return self._call("POST", "/nodes/start", body={"node_id": node_id})

    def isolate_node(self, node_id: int, isolated: bool = True) -> dict:
        return self._call("POST", "/nodes/isolate", body={"node_id": node_id, "isolated": isolated})

    def delay_follower(self, node_id: int, ms: float) -> dict:
        return self._call("POST", "/nodes/delay", body={"node_id": node_id, "ms": ms})

    def restore_nodes(self) -> list[dict]:
        return self._call("POST", "/nodes/restore")

    def leader(self, topic: str, partition: int = 0) -> dict:
        return self._call("GET", "/leader", query={"topic": topic, "partition": partition})

    def move_leader(self, topic: str, partition: int, node_id: int) -> dict:
        return self._call("POST", "/leader", body={"topic": topic, "partition": partition, "node_id": node_id})

    # --- SCRAM users and ACLs -------------------------------------------------------------------------------------

    def users(self) -> dict:
        return self._call("GET", "/users")

    def add_user(self, name: str, password: str, mechanisms=None, iterations: int = 4096) -> dict:
        return self._call("POST", "/users", body={"name": name, "password": password, "mechanisms": mechanisms,
                                                  "iterations": iterations})

    def remove_user(self, name: str, mechanisms=None) -> dict:
        return self._call("DELETE", "/users", body={"name": name, "mechanisms": mechanisms})

    def acls(self, resource_type=None, name=None, pattern_type=None, principal=None, host=None, operation=None,
             permission=None) -> list[dict]:
        return self._call("GET", "/acls", query=_acl_filter(resource_type, name, pattern_type, principal, host,
                                                            operation, permission))

    def add_acls(self, acls: list[dict]) -> list[dict]:
        return self._call("POST", "/acls", body={"acls": acls})

    def remove_acls(self, resource_type=None, name=None, pattern_type=None, principal=None, host=None,
                    operation=None, permission=None) -> list[dict]:
        return self._call("DELETE", "/acls", body=_acl_filter(resource_type, name, pattern_type, principal, host,
                                                              operation, permission))

    # --- topics, records, offsets, requests -----------------------------------------------------------------------

    def topics(self) -> list[dict]:
        return self._call("GET", "/topics")

    def create_topic(self, name: str, partitions: int | None = None, configs: dict | None = None,
                     replication_factor: int | None = None) -> dict:
        return self._call("POST", "/topics", body={"name": name, "partitions": partitions, "configs": configs,
                                                   "replication_factor": replication_factor})

    def records(self, topic: str, partition: int = 0, offset: int | None = None, limit: int | None = None
                ) -> list[dict]:
        query = {"topic": topic, "partition": partition, "offset": offset, "limit": limit}
        return [_decode_record(record) for record in self._call("GET", "/records", query=query)]

    def committed_offsets(self, group: str) -> list[dict]:
        return self._call("GET", "/offsets", query={"group": group})

    def groups(self) -> list[dict]:
        return self._call("GET", "/groups")

    def describe_group(self, group: str) -> dict:
        return self._call("GET", "/group", query={"group": group})

    def telemetry_clients(self) -> list[dict] | None:
        return self._call("GET", "/clients")

    def transactions(self, transactional_id: str | None = None) -> list[dict]:
        return self._call("GET", "/transactions", query={"transactional_id": transactional_id})

    def requests(self, since: int = 0, api=None) -> list[dict]:
        return self._call("GET", "/requests", query={"since": since, "api": api})

    def clear_requests(self) -> dict:
        return self._call("DELETE", "/requests")

    # --- transport ------------------------------------------------------------------------------------------------

    def _call(self, method: str, path: str, *, query: dict | None = None, body: dict | None = None):
        url = self.url + path
        if query:
            url += "?" + urlencode({key: value for key, value in query.items() if value is not None})
        data = None
        headers = {"Accept": "application/json"}
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with _OPENER.open(request, timeout=self.timeout_s) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            raise ControlError(exc.code, _error_message(exc)) from None
        except (urllib.error.URLError, ConnectionError, TimeoutError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ControlError(0, f"cannot reach the control endpoint {self.url}: {reason}") from None


def _acl_filter(resource_type, name, pattern_type, principal, host, operation, permission) -> dict:
    """The filter's fields that are given (left out: any)."""
    fields = {"resource_type": resource_type, "name": name, "pattern_type": pattern_type, "principal": principal,
              "host": host, "operation": operation, "permission": permission}
    return {key: value for key, value in fields.items() if value is not None}


def _error_message(exc: urllib.error.HTTPError) -> str:
    try:
        return json.loads(exc.read()).get("error") or exc.reason
    except (ValueError, AttributeError, OSError):
        return str(exc.reason)


def _decode_record(record: dict) -> dict:
    record = dict(record)
    record["key"] = _unbase64(record.get("key"))
    record["value"] = _unbase64(record.get("value"))
    record["headers"] = [[name, _unbase64(value)] for name, value in record.get("headers") or ()]
    return record


def _unbase64(value):
    return None if value is None else base64.b64decode(value)

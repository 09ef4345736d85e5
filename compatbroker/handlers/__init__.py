"""Request handlers: one module per API, and the registry the server dispatches on.

A handler module declares what it implements and how:

    API_KEY = 3          # Kafka's API key
    MIN_VERSION = 0      # oldest version implemented end to end
    MAX_VERSION = 12     # newest; ApiVersions advertises exactly [MIN_VERSION, MAX_VERSION]
    async def handle(ctx: RequestContext, request) -> response | None

`handle` gets the decoded request body and returns the response body for `ctx.api_version`, or None when Kafka
sends no response (Produce with acks=0). The server encodes the response, keeps per-connection order and turns an
exception into a log line and a closed connection: `CloseConnection` where Kafka answers by closing it (one WARNING
line with its message), any other exception being a bug (ERROR with the traceback).

Handlers of one connection start in arrival order and may run concurrently (a Fetch long poll does not hold up the
requests behind it), so a handler that changes state (an append) should do so before its first `await`; one that
must await first (Produce of a transactional batch the coordinator has to check) takes its place in a queue
before that await (see produce.py).

ApiVersions is built from these declarations (never from the schemas' version ranges); `build_registry` refuses a
range the schemas do not carry or one that includes a version Kafka marks unstable.
"""
from __future__ import annotations

import asyncio
import collections
import functools
import importlib
import inspect
from collections.abc import Mapping
from types import MappingProxyType, ModuleType
from typing import TYPE_CHECKING

from ..protocol import API_KEYS, api_name
from ..security.acls.types import AclOperation, ResourceType
from ..security.operations import operations_field, supported_operations
from ..security.session import Session

if TYPE_CHECKING:
    from ..broker import Broker
    from ..protocol import RequestHeader

HANDLER_MODULES = ["api_versions", "metadata", "produce", "list_offsets", "fetch", "offset_commit", "offset_fetch",
                   "offset_delete", "find_coordinator", "join_group", "sync_group", "heartbeat", "leave_group",
                   "describe_groups", "list_groups", "delete_groups", "init_producer_id", "describe_producers",
                   "create_topics", "delete_topics", "create_partitions", "delete_records", "describe_cluster",
                   "describe_log_dirs", "describe_configs", "alter_configs", "incremental_alter_configs",
                   "offset_for_leader_epoch", "add_partitions_to_txn", "add_offsets_to_txn", "end_txn",
                   "write_txn_markers", "txn_offset_commit", "describe_transactions", "list_transactions",
                   "elect_leaders", "alter_partition_reassignments", "list_partition_reassignments",
                   "describe_topic_partitions", "describe_quorum", "alter_replica_log_dirs",
                   "sasl_handshake", "sasl_authenticate",
                   "create_acls", "describe_acls", "delete_acls",
                   "describe_user_scram_credentials", "alter_user_scram_credentials",
                   "consumer_group_heartbeat", "consumer_group_describe",
                   "share_group_heartbeat", "share_group_describe", "share_fetch", "share_acknowledge",
                   "describe_share_group_offsets", "alter_share_group_offsets", "delete_share_group_offsets",
                   "get_telemetry_subscriptions", "push_telemetry", "list_config_resources"]
"""Modules of this package that serve requests."""


class CloseConnection(Exception):
    """Raised by a handler when Kafka's answer is to close the connection (a failed Produce with acks=0 has no
    response to carry its error). The server logs the message as one WARNING line and closes the connection."""


class CloseAfterResponse(Exception):
    """Raised by a handler whose response must reach the client before the connection closes (a failed SASL
    authentication, an unsupported mechanism): the server sends `response`, logs `reason` as one line, closes."""

    def __init__(self, response, reason: str):
        super().__init__(reason)
        self.response = response


class RequestContext:
    """What a handler knows about the request besides its body, and the authorization checks it makes (Kafka's
    AuthHelper): with no authorizer configured they allow everything for the cost of one attribute check."""

    __slots__ = ("broker", "header", "api_version", "client_id", "peer", "listener_host", "listener_port",
                 "handlers", "client_gone", "session", "authenticator")

    def __init__(self, broker: Broker, header: RequestHeader, *, peer: str = "", listener_host: str = "",
                 listener_port: int = 0, handlers: Mapping[int, ModuleType] | None = None,
                 client_gone: asyncio.Future | None = None, session: Session | None = None,
                 authenticator=None):
        self.broker = broker
        self.header = header
        self.api_version: int = header.request_api_version
        self.client_id: str | None = header.client_id
        self.peer = peer                      # "host:port" of the client, for logs
        self.listener_host = listener_host    # where the request arrived: Metadata answers the advertised
        self.listener_port = listener_port    # endpoint of this listener (broker.advertised_endpoint)
        self.handlers = handlers              # the registry serving this request; None: the default one
        self.client_gone = client_gone        # resolved when the client closes its end: stop waiting for it
        self.session = session if session is not None else Session()  # who sent it (anonymous on PLAINTEXT)
        self.authenticator = authenticator    # the connection's SASL state (security.authenticator); None: no SASL

    # --- authorization ----------------------------------------------------------------------------------------------

    def authorize(self, operation: AclOperation, resource_type: ResourceType, name: str, *,
                  log_if_allowed: bool = True, log_if_denied: bool = True) -> bool:
        """May this request's principal do `operation` on the resource (a LITERAL name)?"""
        authorizer = self.broker.security.authorizer
        if authorizer is None:
            return True
        return authorizer.authorize(self.session, operation, resource_type, name, log_if_allowed=log_if_allowed,
                                    log_if_denied=log_if_denied, request=self._api_name())

    def authorize_by_resource_type(self, operation: AclOperation, resource_type: ResourceType) -> bool:
        """Kafka's authorizeByResourceType: may the principal do `operation` on some resource of the type (an
        ALLOW that no DENY cancels)? Used where any topic would do (idempotent produce without IDEMPOTENT_WRITE)."""
        authorizer = self.broker.security.authorizer
        return authorizer is None or authorizer.authorize_by_resource_type(self.session, operation, resource_type)

    def authorized_operations(self, resource_type: ResourceType, name: str) -> int:
        """The 32-bit field of operations allowed on the resource (bit n: AclOperation n), as the
        `*_authorized_operations` fields carry it; every supported operation when no authorizer is configured."""
        authorizer = self.broker.security.authorizer
        if authorizer is None:
            return operations_field(supported_operations(resource_type))
        return authorizer.authorized_operations(self.session, resource_type, name)

    def filter_authorized(self, operation: AclOperation, resource_type: ResourceType, names, *,
                          log_if_allowed: bool = True, log_if_denied: bool = True) -> set[str]:
        """The names among `names` the principal may do `operation` on (each checked once; the log line counts
        how often the request names it, as Kafka's resourceRefCount)."""
        authorizer = self.broker.security.authorizer
        if authorizer is None:
            return set(names)
        request = self._api_name()
        return {name for name, count in collections.Counter(names).items()
                if authorizer.authorize(self.session, operation, resource_type, name, log_if_allowed=log_if_allowed,
                                        log_if_denied=log_if_denied, request=request, ref_count=count)}

    def _api_name(self) -> str:
        return api_name(self.header.request_api_key)

    def __repr__(self):
        return (f"RequestContext(api_key={self.header.request_api_key}, api_version={self.api_version}, "
                f"client_id={self.client_id!r}, peer={self.peer!r})")


class RegistryError(ValueError):
    """A handler module's declaration does not fit the protocol schemas."""


def build_registry(modules: list[str | ModuleType]) -> Mapping[int, ModuleType]:
    """API key -> handler module, for module names of this package or module-like objects (tests)."""
    registry = {}
    for entry in modules:
        module = importlib.import_module(f"{__name__}.{entry}") if isinstance(entry, str) else entry
        _check_declaration(module)
        if module.API_KEY in registry:
            raise RegistryError(f"API key {module.API_KEY} is served by both {registry[module.API_KEY].__name__} "
                                f"and {module.__name__}")
        registry[module.API_KEY] = module
    return MappingProxyType(dict(sorted(registry.items())))


def _check_declaration(module) -> None:
    name = getattr(module, "__name__", repr(module))
    pair = API_KEYS.get(getattr(module, "API_KEY", None))
    if pair is None:
        raise RegistryError(f"{name}: API_KEY {getattr(module, 'API_KEY', None)!r} is not an API of the schemas")
    request_cls = pair[0]
    low, high = request_cls.VALID_VERSIONS
    if not low <= module.MIN_VERSION <= module.MAX_VERSION <= high:
        raise RegistryError(f"{name}: versions {module.MIN_VERSION}-{module.MAX_VERSION} are outside the "
                            f"{request_cls.NAME} schema's {low}-{high}")
    if getattr(request_cls, "LATEST_VERSION_UNSTABLE", False) and module.MAX_VERSION == high:
        raise RegistryError(f"{name}: {request_cls.NAME} v{high} is marked unstable and must not be advertised")
    if not inspect.iscoroutinefunction(module.handle):
        raise RegistryError(f"{name}: handle must be an async function")


@functools.cache
def default_registry() -> Mapping[int, ModuleType]:
    """The registry of HANDLER_MODULES, built on first use (so that importing RequestContext imports no handler)."""
    return build_registry(HANDLER_MODULES)


def __getattr__(name):
    # `from compatbroker.handlers import HANDLERS`: the registry is built lazily, see default_registry.
    if name == "HANDLERS":
        return default_registry()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""The handler registry's checks and the ApiVersions handler built on it."""
from __future__ import annotations

import pytest

from compatbroker.handlers import HANDLER_MODULES, RegistryError, RequestContext, api_versions, build_registry
from compatbroker.protocol import API_KEYS, RequestHeader
from compatbroker.protocol.messages import ApiVersionsRequest

from .helpers import handler_module


async def _noop(ctx, request):
    return None


class _Broker:
    finalized_transaction_version = 2


def _context(version: int, registry) -> RequestContext:
    header = RequestHeader(request_api_key=18, request_api_version=version, correlation_id=1, client_id="c")
    return RequestContext(_Broker(), header, handlers=registry)


async def test_api_versions_advertises_exactly_the_registry():
    registry = build_registry([api_versions, handler_module(3, _noop, min_version=1, max_version=9),
                               handler_module(0, _noop, max_version=7)])
    for version in range(5):
        response = await api_versions.handle(_context(version, registry), ApiVersionsRequest(
            client_software_name="kafka-python", client_software_version="3.0.12"))
        assert response.error_code == 0
        assert [(k.api_key, k.min_version, k.max_version) for k in response.api_keys] == [(0, 0, 7), (3, 1, 9),
                                                                                          (18, 0, 4)]


@pytest.mark.parametrize("name, version", [("", "1"), ("-bad", "1"), ("ok", "1.0+build"), ("ok", "1.")])
async def test_invalid_software_name_or_version_from_v3_is_invalid_request(name, version):
    registry = build_registry([api_versions])
    request = ApiVersionsRequest(client_software_name=name, client_software_version=version)
    response = await api_versions.handle(_context(3, registry), request)
    assert (response.error_code, response.api_keys) == (42, [])
    older = await api_versions.handle(_context(2, registry), request)  # not checked before v3
    assert older.error_code == 0


def test_the_default_modules_declare_ranges_the_schemas_carry():
    registry = build_registry(HANDLER_MODULES)
    assert len(registry) == len(HANDLER_MODULES)
    assert {0, 1, 2, 3, 18} <= set(registry)  # Produce, Fetch, ListOffsets, Metadata, ApiVersions
    for key, module in registry.items():
        low, high = API_KEYS[key][0].VALID_VERSIONS
        assert low <= module.MIN_VERSION <= module.MAX_VERSION <= high
        assert module.__doc__ and module.__doc__.strip()


@pytest.mark.parametrize("module, message", [
    (handler_module(22, _noop), "marked unstable"),                 # InitProducerId's newest version is unstable
    (handler_module(3, _noop, max_version=14), "outside"),
    (handler_module(3, _noop, min_version=5, max_version=4), "outside"),
    (handler_module(9999, _noop, max_version=0), "not an API"),
])
def test_registry_refuses_declarations_the_schemas_do_not_allow(module, message):
    with pytest.raises(RegistryError, match=message):
        build_registry([module])


def test_registry_refuses_two_modules_for_one_api_and_plain_functions():
    with pytest.raises(RegistryError, match="served by both"):
        build_registry([handler_module(3, _noop), handler_module(3, _noop)])

    def not_async(ctx, request):
        return None

    with pytest.raises(RegistryError, match="async"):
        build_registry([handler_module(3, not_async)])

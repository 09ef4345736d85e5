"""ApiVersions' feature flags: `transaction.version`, `group.version` and `share.version` supported and finalized as
a fresh Kafka 4.2 cluster reports them, per request version, finalized level and emulated release."""
from __future__ import annotations

import pytest

from compatbroker.toolkit.emulation import emulated_registry
from compatbroker.handlers import RequestContext, api_versions, default_registry
from compatbroker.protocol import RequestHeader
from compatbroker.protocol.messages import ApiVersionsRequest

from .helpers import call


def supported(answer) -> list[tuple[str, int, int]]:
    return [(f.name, f.min_version, f.max_version) for f in answer.supported_features]


def finalized(answer) -> list[tuple[str, int, int]]:
    return [(f.name, f.min_version_level, f.max_version_level) for f in answer.finalized_features]


async def ask(broker, version: int):
    request = ApiVersionsRequest(client_software_name="tests", client_software_version="1.0")
    return (await call(broker, version, request)).decoded


GROUP_FEATURES = [("group.version", 1, 1), ("share.version", 1, 1)]


async def test_v4_reports_the_features_supported_and_finalized(broker):
    answer = await ask(broker, 4)
    assert supported(answer) == [("group.version", 0, 1), ("share.version", 0, 1), ("transaction.version", 0, 2)]
    assert finalized(answer) == [*GROUP_FEATURES, ("transaction.version", 2, 2)]
    assert answer.finalized_features_epoch == api_versions.FINALIZED_FEATURES_EPOCH >= 0


async def test_v3_leaves_out_a_supported_range_starting_at_level_0(broker):
    """KAFKA-17492: clients of ApiVersions v3 cannot parse a supported minimum of 0; the finalized level stays."""
    answer = await ask(broker, 3)
    assert (supported(answer), finalized(answer)) == ([], [*GROUP_FEATURES, ("transaction.version", 2, 2)])


@pytest.mark.parametrize("version", [0, 1, 2])
async def test_versions_before_3_carry_no_features(broker, version):
    answer = await ask(broker, version)
    assert answer.error_code == 0 and answer.api_keys


async def test_a_finalized_level_0_is_not_listed(broker):
    broker.finalized_transaction_version = 0
    answer = await ask(broker, 4)
    assert (finalized(answer), answer.finalized_features_epoch) == (GROUP_FEATURES, 1)
    assert ("transaction.version", 0, 2) in supported(answer)


async def test_an_emulated_release_without_features_has_no_finalized_epoch(broker):
    registry = emulated_registry(default_registry(), "3.9")
    header = RequestHeader(request_api_key=18, request_api_version=4, correlation_id=1, client_id="c")
    ctx = RequestContext(broker, header, handlers=registry)
    broker.finalized_transaction_version = 0
    answer = await registry[18].handle(ctx, ApiVersionsRequest(client_software_name="a", client_software_version="1"))
    assert (finalized(answer), answer.finalized_features_epoch) == ([], -1)


@pytest.mark.parametrize("release, expected", [("2.8", []), ("3.9", []), ("4.0", [("transaction.version", 0, 2)]),
                                               ("4.3", [("transaction.version", 0, 2)])])
async def test_an_emulated_release_reports_its_supported_range(broker, release, expected):
    registry = emulated_registry(default_registry(), release)
    header = RequestHeader(request_api_key=18, request_api_version=4, correlation_id=1, client_id="c")
    ctx = RequestContext(broker, header, handlers=registry)
    answer = await registry[18].handle(ctx, ApiVersionsRequest(client_software_name="a", client_software_version="1"))
    assert supported(answer) == expected

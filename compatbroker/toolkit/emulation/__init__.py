"""Version emulation: make ApiVersions advertise what one Apache Kafka release advertises, and refuse the rest.

One broker can then stand in for Kafka 2.8 or 4.3 in a CI matrix (`compatbroker serve --emulate 4.0`).

Each release has a table in `releases/<release>.json`: every API key with the version range that release's broker
advertises in ApiVersions with its default configuration, and where the table came from. `accepted_min` marks
Kafka's one quirk of advertising versions it refuses: from 4.0 on, ApiVersions lists Produce from version 0 (old
librdkafka needs it) while the broker rejects Produce v0-2.

`emulated_registry(registry, release)` turns our handler registry into the release's:
- an API both sides have gets the release's range intersected with the versions we implement;
- an API the release has and we do not serve stays unadvertised, since advertising it would make a client send
  requests that nobody answers;
- an API we serve that the release lacks is dropped, as that release's clients would not find it either;
- a version outside the range is refused exactly as any unserved version is (the server closes the connection;
  ApiVersions newer than ours gets its UNSUPPORTED_VERSION answer), and a version below `accepted_min` closes the
  connection too, which is what Kafka does with it.
The handlers themselves are shared; only the declared ranges change.

Each table also says which feature levels the release reports in ApiVersions (`features`): the `transaction.version`
range its broker supports and the level a cluster formatted with it finalizes (2.8: no such feature; 3.9: level 0
only; 4.0 on: 0-2, finalized 2). The emulated handlers carry the supported ranges (`EmulatedHandler.
supported_features`), which the ApiVersions handler reports, and the toolkit has the runtime finalize the release's
level (`finalized_transaction_version`, see `compatbroker.toolkit.runtime`), so the transaction coordinator and the
handlers behave as that release's cluster does.
"""
from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Mapping
from importlib import resources

from ...handlers import CloseConnection

RELEASES = ("2.8", "3.9", "4.0", "4.1", "4.3")


class UnknownRelease(ValueError):
    pass


class RefusedVersion(CloseConnection):
    """A request of a version the emulated release advertises but refuses: the server closes the connection with
    one WARNING line, as it does for any request whose answer is a closed connection."""


@dataclasses.dataclass(frozen=True)
class ApiRange:
    key: int
    name: str
    min: int
    max: int
    accepted_min: int  # the oldest version the broker takes; above `min` only where Kafka advertises more


@dataclasses.dataclass(frozen=True)
class FeatureLevels:
    min: int        # the levels the release's broker supports
    max: int
    finalized: int  # the level a cluster formatted with the release finalizes


@functools.cache
def _document(release: str) -> dict:
    if release not in RELEASES:
        raise UnknownRelease(f"unknown Kafka release {release!r}; known: {', '.join(RELEASES)}")
    text = resources.files(__package__).joinpath("releases", f"{release}.json").read_text(encoding="utf-8")
    return json.loads(text)


def feature_levels(release: str) -> Mapping[str, FeatureLevels]:
    """Feature name -> the levels Kafka `release` supports and finalizes."""
    return {name: FeatureLevels(levels["min"], levels["max"], levels["finalized"])
            for name, levels in _document(release)["features"].items()}


def supported_features(release: str) -> dict[str, tuple[int, int]]:
    """Feature name -> (min, max) supported level, as the release's ApiVersions builds it."""
    return {name: (levels.min, levels.max) for name, levels in feature_levels(release).items()}


def finalized_transaction_version(release: str) -> int:
    """The `transaction.version` level a cluster of `release` finalizes (0 where the feature does not exist)."""
    levels = feature_levels(release).get("transaction.version")
    return 0 if levels is None else levels.finalized


def release_of(registry: Mapping[int, object] | None) -> str | None:
    """The release an emulated registry stands in for; None for any other registry."""
    for module in (registry or {}).values():
        return getattr(module, "release", None)
    return None


@functools.cache
def release_table(release: str) -> Mapping[int, ApiRange]:
    """API key -> ApiRange for every API the release advertises."""
    table = {}
    for api in _document(release)["apis"]:
        table[api["key"]] = ApiRange(api["key"], api["name"], api["min"], api["max"],
                                     api.get("accepted_min", api["min"]))
    return table


def advertised(release: str) -> dict[int, tuple[int, int]]:
    """API key -> (min, max) that Kafka `release` lists in its ApiVersions response."""
    return {key: (api.min, api.max) for key, api in release_table(release).items()}


def emulated_registry(registry: Mapping[int, object], release: str) -> Mapping[int, object]:
    """A handler registry that serves `registry`'s handlers with the version ranges of Kafka `release`."""
    from ...handlers import build_registry  # the registry's own checks apply to the emulated ranges too

    stand_ins = []
    for key, module in registry.items():
        api = release_table(release).get(key)
        if api is None:
            continue
        low, high = max(api.min, module.MIN_VERSION), min(api.max, module.MAX_VERSION)
        if low > high:
            continue
        stand_ins.append(EmulatedHandler(module, release, low, high, accepted_min=api.accepted_min,
                                         supported_features=supported_features(release)))
    return build_registry(stand_ins)


class EmulatedHandler:
    """Stands in for a handler module: the same API and `handle`, the emulated release's version range, and the
    feature levels the release supports (`supported_features`, which ApiVersions reports)."""

    def __init__(self, module, release: str, min_version: int, max_version: int, *, accepted_min: int,
                 supported_features: Mapping[str, tuple[int, int]] | None = None):
        self.__name__ = f"{module.__name__} (as Kafka {release})"
        self.API_KEY = module.API_KEY
        self.MIN_VERSION = min_version
        self.MAX_VERSION = max_version
        self.module = module
        self.release = release
        self.accepted_min = accepted_min
        self.supported_features = dict(supported_features or {})
        # Only a refusing stand-in wraps `handle`: the others add no call to the hot path.
        self.handle = self._refusing_handle if accepted_min > min_version else module.handle

    async def _refusing_handle(self, ctx, request):
        if ctx.api_version < self.accepted_min:
            raise RefusedVersion(f"{self.__name__} v{ctx.api_version} is advertised but refused below "
                                 f"v{self.accepted_min}")
        return await self.module.handle(ctx, request)

    def __repr__(self):
        return f"<EmulatedHandler {self.__name__} v{self.MIN_VERSION}-{self.MAX_VERSION}>"


__all__ = ["RELEASES", "ApiRange", "EmulatedHandler", "FeatureLevels", "RefusedVersion", "UnknownRelease",
           "advertised", "emulated_registry", "feature_levels", "finalized_transaction_version", "release_of",
           "release_table", "supported_features"]

"""Named sets of configs kept in one JSON file of a data directory, saved whole and atomically on each change and
read at start: the GROUP config overrides (`compatbroker.cluster.metadata.GroupConfigs`) and the client metrics
subscriptions (`compatbroker.telemetry.subscriptions.SubscriptionStore`). The values are checked by the caller;
this only keeps and persists them, as the text they were set to.
"""
from __future__ import annotations

import json
import os
from collections.abc import Mapping

from .checkpoints import write_atomically

_FORMAT_VERSION = 1


class ConfigSets:
    """Name -> {config name: value text}, saved in `<directory>/<FILE_NAME>` under `KEY` on each change (directory
    None: kept in memory only). Subclasses name the file, the key and what the sets are (`WHAT`, for errors)."""

    FILE_NAME: str
    KEY: str
    WHAT: str

    def __init__(self, directory: str | None = None):
        self._path = None if directory is None else os.path.join(directory, self.FILE_NAME)
        self._configs: dict[str, dict[str, str]] = {}

    def names(self) -> list[str]:
        return sorted(self._configs)

    def get(self, name: str) -> dict[str, str]:
        return dict(self._configs.get(name, {}))

    def items(self) -> list[tuple[str, dict[str, str]]]:
        return [(name, dict(configs)) for name, configs in sorted(self._configs.items())]

    def set(self, name: str, configs: Mapping[str, str]) -> None:
        """Make `configs` the whole set of `name` (empty: none) and save; OSError when the disk refuses (nothing
        changes then)."""
        changed = dict(self._configs)
        if configs:
            changed[name] = dict(configs)
        else:
            changed.pop(name, None)
        if self._path is not None:
            write_atomically(self._path, json.dumps({"version": _FORMAT_VERSION, self.KEY: changed},
                                                    indent=1, sort_keys=True).encode())
        self._configs = changed

    @classmethod
    def load(cls, directory: str):
        """The saved sets of `directory`, or none; ValueError when the file is unreadable."""
        store = cls(directory)
        try:
            with open(store._path, "rb") as source:
                data = json.loads(source.read())
        except FileNotFoundError:
            return store
        except (OSError, ValueError) as exc:
            raise ValueError(f"{store._path}: unreadable {cls.WHAT}: {exc}") from None
        sets = data.get(cls.KEY) if isinstance(data, dict) else None
        if not isinstance(sets, dict) or not all(isinstance(configs, dict) for configs in sets.values()):
            raise ValueError(f"{store._path}: unreadable {cls.WHAT}: not a map of {cls.KEY} to configs")
        store._configs = {str(name): {str(key): str(value) for key, value in configs.items()}
                          for name, configs in sets.items()}
        return store

"""Lazy tables of the generated message classes, used by the generated `messages/__init__.py`.

Importing every generated module up front costs a noticeable part of a broker's start-up time, so the tables load
a module the first time one of its classes is asked for.
"""
from __future__ import annotations

import importlib
from collections.abc import Mapping


def load(package: str, module_of: dict[str, str], name: str):
    module = importlib.import_module(f"{package}.{module_of[name]}")
    return getattr(module, name)


class LazyMessages(Mapping):
    """message name -> generated class."""

    def __init__(self, package: str, module_of: dict[str, str]):
        self._package = package
        self._module_of = module_of
        self._loaded: dict[str, type] = {}

    def __getitem__(self, name):
        cls = self._loaded.get(name)
        if cls is None:
            if name not in self._module_of:
                raise KeyError(name)
            cls = self._loaded[name] = load(self._package, self._module_of, name)
        return cls

    def __iter__(self):
        return iter(self._module_of)

    def __len__(self):
        return len(self._module_of)


class LazyApiKeys(Mapping):
    """api key -> (request class, response class)."""

    def __init__(self, messages: LazyMessages, names: dict[int, tuple[str, str]]):
        self._messages = messages
        self._names = names
        self._loaded: dict[int, tuple[type, type]] = {}

    def __getitem__(self, key):
        pair = self._loaded.get(key)
        if pair is None:
            request, response = self._names[key]
            pair = self._loaded[key] = (self._messages[request], self._messages[response])
        return pair

    def get(self, key, default=None):
        pair = self._loaded.get(key)
        if pair is not None:
            return pair
        return self[key] if key in self._names else default

    def __contains__(self, key):
        return key in self._names

    def __iter__(self):
        return iter(self._names)

    def __len__(self):
        return len(self._names)

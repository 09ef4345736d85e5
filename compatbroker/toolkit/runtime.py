"""How the toolkit plugs into the server's runtime (`compatbroker.server.run.ClusterRuntime`).

The server never imports the toolkit; the command line (`compatbroker serve --emulate ... --control-listen ...`)
and the embedded broker build a `Toolkit` here and hand its `runtime_options()` to the runtime:

- `--emulate RELEASE`: the handler registry emulating that Kafka release (`emulation`), the
  `transaction.version` level the release finalizes, and the release itself (`emulated_release`: a 3.x release
  takes the topic configs Kafka 4.0 removed);
- a fault injector (`faults.FaultInjector`) as the servers' request hooks, recording the request log when asked
  (with a control endpoint, where someone can read it, or in the embedded broker);
- `--control-listen HOST:PORT`: the HTTP control endpoint as a service of the runtime (`control.http`).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType

from ..server.run import StartupError
from .faults import FaultInjector


@dataclass
class Toolkit:
    handlers: Mapping[int, ModuleType] | None = None   # None: the default registry
    finalized_transaction_version: int | None = None   # None: the broker's own level
    emulated_release: str | None = None                # the release --emulate names (None: none)
    injector: FaultInjector | None = None              # the request hooks (None: none)
    control: object | None = None                      # control.http.ControlService, when asked for

    def runtime_options(self) -> dict:
        """Keyword arguments for `ClusterRuntime` (and `compatbroker.server.run`)."""
        return {"handlers": self.handlers, "finalized_transaction_version": self.finalized_transaction_version,
                "emulated_release": self.emulated_release, "hooks": self.injector,
                "services": [self.control] if self.control is not None else []}


def toolkit_for(*, emulate: str | None = None, control_listen: str | None = None,
                record_requests: bool | None = None) -> Toolkit:
    """The toolkit pieces for these options (StartupError for an unknown release). A fault injector comes with the
    control endpoint or `record_requests`; the request log records when `record_requests` says so (default: with
    a control endpoint)."""
    toolkit = Toolkit()
    if emulate is not None:
        toolkit.handlers, toolkit.finalized_transaction_version = _emulation(emulate)
        toolkit.emulated_release = emulate
    record = control_listen is not None if record_requests is None else record_requests
    if record or control_listen is not None:
        toolkit.injector = FaultInjector(record_requests=record)
    if control_listen is not None:
        from .control.http import ControlService
        toolkit.control = ControlService(control_listen, toolkit.injector)
    return toolkit


def _emulation(release: str) -> tuple[Mapping[int, ModuleType], int]:
    from ..handlers import default_registry
    from .emulation import RELEASES, emulated_registry, finalized_transaction_version

    if release not in RELEASES:
        raise StartupError(f"--emulate: unknown Kafka release {release!r}; known: {', '.join(RELEASES)}")
    return emulated_registry(default_registry(), release), finalized_transaction_version(release)

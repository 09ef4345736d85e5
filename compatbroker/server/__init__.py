"""The network layer: sockets, framing, per-connection ordering, and the `serve` entry point.

It knows nothing about individual APIs: each request goes to the handler module registered for its API key (see
`compatbroker.handlers`), and the response comes back as chunks to write (`compatbroker.protocol`).
"""
from .listeners import BoundListener, ListenError
from .run import ClusterRuntime, StartupError, run, serve
from .server import Server

__all__ = ["BoundListener", "ClusterRuntime", "ListenError", "Server", "StartupError", "run", "serve"]

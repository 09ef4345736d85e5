"""compatbroker in Docker for teams that start their test dependencies with testcontainers.

    from compatbroker.toolkit.testing import CompatBrokerContainer

    with CompatBrokerContainer(emulate="3.9") as broker:
        producer = KafkaProducer(bootstrap_servers=broker.get_bootstrap_server())

The container runs `compatbroker serve` from the image that the repository's Dockerfile builds
(`CompatBrokerContainer.build_image(repo)` builds it, or `docker build -t compatbroker .`). Kafka clients connect to
the address the broker advertises, which must be the one reachable from the host; that port is only known once
Docker maps it, so the container binds a free host port chosen beforehand and advertises it from the start. With a
local engine the port is mapped on 127.0.0.1 only and advertised as 127.0.0.1:PORT (not `localhost`, which a client
may try as ::1 first); with a remote engine it is mapped on every interface and advertised under the engine's host.

testcontainers is imported when the class is first used, so importing this module needs nothing beyond
compatbroker itself (`pip install testcontainers` for the container).
"""
from __future__ import annotations

import functools
import socket

DEFAULT_IMAGE = "compatbroker:latest"
BROKER_PORT = 9092
READY_LINE = r"compatbroker listening on "
LOOPBACK_NAMES = {"localhost", "127.0.0.1", "::1"}


def __getattr__(name):
    if name == "CompatBrokerContainer":
        return _container_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@functools.cache
def _container_class():
    try:
        from testcontainers.core.container import DockerContainer
        from testcontainers.core.image import DockerImage
        from testcontainers.core.wait_strategies import LogMessageWaitStrategy
    except ImportError:
        raise ImportError("CompatBrokerContainer needs testcontainers: pip install testcontainers") from None

    class CompatBrokerContainer(DockerContainer):
        """A compatbroker in a container: `emulate` picks a Kafka release to stand in for (see --emulate),
        `settings` are Kafka-named broker settings (--set NAME=VALUE)."""

        def __init__(self, image: str = DEFAULT_IMAGE, *, emulate: str | None = None,
                     settings: dict[str, str] | None = None, host_port: int | None = None, **kwargs):
            super().__init__(image, **kwargs)
            self.host_port = host_port or _free_port()
            self.emulate = emulate
            self.settings = dict(settings or {})
            self.advertised_host: str | None = None  # set when the container starts
            self.with_bind_ports(BROKER_PORT, self.host_port)
            # the broker starts in well under a second; testcontainers' 1 s polling would double that
            self.waiting_for(LogMessageWaitStrategy(READY_LINE).with_poll_interval(0.2))

        def _configure(self) -> None:
            try:
                host = self.get_container_host_ip()
            except Exception:  # noqa: BLE001 - gateway and bridge modes know the address only once it runs
                host = self.get_docker_client().host()
            if host in LOOPBACK_NAMES:
                host = "127.0.0.1"
                # docker-py takes (host ip, host port): reachable from this machine only
                self.ports[str(BROKER_PORT)] = (host, self.host_port)
            self.advertised_host = host
            self.with_command(self.serve_command())

        def serve_command(self) -> list[str]:
            """The container's command: serve on every interface, advertise the host's mapped address."""
            command = ["serve", "--listen", f"0.0.0.0:{BROKER_PORT}",
                       "--advertised-listener", f"{self.advertised_host}:{self.host_port}"]
            if self.emulate is not None:
                command += ["--emulate", self.emulate]
            for name, value in self.settings.items():
                command += ["--set", f"{name}={value}"]
            return command

        def get_bootstrap_server(self) -> str:
            """`host:port` for a Kafka client's bootstrap servers (the same name as testcontainers' Kafka)."""
            if self.advertised_host is None:
                raise RuntimeError("the container has not been started")
            return f"{self.advertised_host}:{self.host_port}"

        @staticmethod
        def build_image(repo_path, tag: str = DEFAULT_IMAGE, *, base_image: str | None = None,
                        network_mode: str | None = None, timeout: float = 900) -> str:
            """Build the repository's Dockerfile as `tag` and return the tag.

            `base_image` replaces the Dockerfile's BASE_IMAGE (python:3.11-slim); `network_mode="host"` gives its
            RUN steps (pip) the host's network, for engines whose containers have none of their own. `timeout`
            bounds each wait for the engine's next word (docker-py's 60 s default can cut a slow step short)."""
            options = {"network_mode": network_mode} if network_mode else {}
            if base_image:
                options["buildargs"] = {"BASE_IMAGE": base_image}
            DockerImage(path=str(repo_path), tag=tag, clean_up=False, docker_client_kw={"timeout": timeout},
                        **options).build()
            return tag

    return CompatBrokerContainer


def _free_port() -> int:
    """A TCP port free on this host now (the usual race: another process could take it before Docker does)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("", 0))
        return probe.getsockname()[1]


__all__ = ["DEFAULT_IMAGE", "CompatBrokerContainer"]  # noqa: F822 - provided by __getattr__

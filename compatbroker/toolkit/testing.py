"""compatbroker in Docker for teams that start their test dependencies with testcontainers.

    from compatbroker.toolkit.testing import CompatBrokerContainer

    with CompatBrokerContainer(emulate="3.9") as broker:
        producer = KafkaProducer(bootstrap_servers=broker.get_bootstrap_server())

The container runs `compatbroker serve` from the image that the repository's Dockerfile builds
(`CompatBrokerContainer.build_image(repo)` builds it, or `docker build -t compatbroker .`). Kafka clients connect to
the address the broker advertises, which must be the one reachable from the host; that port is only known once
Docker maps it, so the container binds a free host port chosen beforehand and advertises it from the start.

testcontainers is imported when the class is first used, so importing this module needs nothing beyond
compatbroker itself (`pip install testcontainers` for the container).
"""
from __future__ import annotations

import functools
import socket

DEFAULT_IMAGE = "compatbroker:latest"
BROKER_PORT = 9092
READY_LINE = r"compatbroker listening on "


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
            self.waiting_for(LogMessageWaitStrategy(READY_LINE))

        def _configure(self) -> None:
            try:
                self.advertised_host = self.get_container_host_ip()
            except Exception:  # noqa: BLE001 - gateway and bridge modes know the address only once it runs
                self.advertised_host = self.get_docker_client().host()
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
        def build_image(repo_path, tag: str = DEFAULT_IMAGE) -> str:
            """Build the repository's Dockerfile as `tag` and return the tag."""
            DockerImage(path=repo_path, tag=tag, clean_up=False).build()
            return tag

    return CompatBrokerContainer


def _free_port() -> int:
    """A TCP port free on this host now (the usual race: another process could take it before Docker does)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("", 0))
        return probe.getsockname()[1]


__all__ = ["DEFAULT_IMAGE", "CompatBrokerContainer"]  # noqa: F822 - provided by __getattr__

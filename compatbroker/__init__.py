"""compatbroker: a Kafka wire-protocol compatible broker in Python.

`from compatbroker import EmbeddedBroker` gives a broker for test suites (see `compatbroker.toolkit.embedded`), and
`SecuritySetup` its TLS, SASL and ACL settings (`compatbroker.toolkit.security`); they are imported on first use,
so that `import compatbroker` (done by the pytest plugin in every test run) stays cheap.
"""

__version__ = "0.1.0"

__all__ = ["EmbeddedBroker", "SecuritySetup", "__version__"]


def __getattr__(name):
    if name == "EmbeddedBroker":
        from .toolkit.embedded import EmbeddedBroker
        return EmbeddedBroker
    if name == "SecuritySetup":
        from .toolkit.security import SecuritySetup
        return SecuritySetup
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""compatbroker: a Kafka wire-protocol compatible broker in Python."""

__version__ = "0.1.0"

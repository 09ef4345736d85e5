"""The one exception of the client: `KafkaError(code, name, message)`, named as Kafka names its error codes.

A broker's answer carries an error code (and sometimes a message); the client raises it as a `KafkaError` whose
`name` is Kafka's (`TOPIC_ALREADY_EXISTS`) and whose `message` is the broker's own text when it sent one, else the
code's one-line explanation. Failures on the client's side use the same class with the code Kafka's clients map
them to, in two subclasses that callers (the CLI's exit codes) tell apart:

- `KafkaConnectionError` (NETWORK_EXCEPTION): nothing listening, the connection dropped, TLS failed;
- `KafkaTimeoutError` (REQUEST_TIMED_OUT): no answer within request.timeout.ms.

`ClientConfigError` (a ValueError) is a bad client setting, found before anything is sent.
"""
from __future__ import annotations

from compatbroker.protocol.error_codes import ErrorCode


class ClientConfigError(ValueError):
    """A client setting that cannot be used (unknown name, bad value)."""


class KafkaError(Exception):
    """An error with Kafka's code and name. `items` holds per-item outcomes when one call covered several items
    (for example {topic: KafkaError | None}); it is empty otherwise."""

    def __init__(self, code: int, message: str | None = None, *, name: str | None = None, items=None):
        error = ErrorCode.for_code(code)
        self.code = int(code)
        self.name = name or (error.name if error.value == code else f"UNKNOWN_ERROR_{code}")
        self.message = message or error.message
        self.retriable = error.retriable if error.value == code else False
        self.items = dict(items or {})
        super().__init__(f"{self.name}: {self.message}")

    def to_json(self) -> dict:
        """{"code": int, "name": str, "message": str}: the form `--format json` output uses for an error."""
        return {"code": self.code, "name": self.name, "message": self.message}


class KafkaConnectionError(KafkaError):
    """The client could not talk to a broker: nothing listening, connection closed or reset, TLS failure.
    `unreachable` is true when no TCP connection could be made at all (refused, no route, connect timeout): the
    case the client waits out for a broker that is still starting."""

    def __init__(self, message: str, *, unreachable: bool = False):
        super().__init__(ErrorCode.NETWORK_EXCEPTION, message)
        self.unreachable = unreachable


class KafkaTimeoutError(KafkaError):
    """A broker did not answer within the request timeout."""

    def __init__(self, message: str):
        super().__init__(ErrorCode.REQUEST_TIMED_OUT, message)


def check(code: int, message: str | None = None) -> None:
    """Raises the KafkaError of a non-zero error code; returns for 0."""
    if code:
        raise KafkaError(code, message)


def error_or_none(code: int, message: str | None = None) -> KafkaError | None:
    """The KafkaError of a non-zero code (to report per item), None for 0."""
    return KafkaError(code, message) if code else None

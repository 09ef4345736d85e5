"""The exceptions the protocol package raises."""


class DecodeError(ValueError):
    """Malformed protocol input. The message names the API, version and field where decoding failed."""


class EncodeError(ValueError):
    """A value cannot be written at the requested version (out of range, null where not nullable, a field the
    version lacks holding a non-default value, ...)."""


class UnsupportedVersionError(DecodeError):
    """The API key or version is not one the schemas define. `header` holds whatever of the request header could be
    read (api_key, api_version, correlation_id, client_id), so a server can still answer or log it."""

    def __init__(self, message, header=None):
        super().__init__(message)
        self.header = header

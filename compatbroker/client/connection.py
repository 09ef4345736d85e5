"""One blocking connection to one broker: size-prefixed frames, correlation ids, TLS, the ApiVersions exchange and
SASL authentication, as Kafka's clients do them on a new connection.

`BrokerConnection(host, port, config).open()` connects (socket.connection.setup.timeout.ms), wraps the socket in
TLS for SSL and SASL_SSL, asks ApiVersions (the newest version this codec knows; an older broker answers
UNSUPPORTED_VERSION in a v0 body listing its range, and the request is repeated with the best version it takes),
then authenticates for SASL_* (SaslHandshake v1 and SaslAuthenticate). `request(body, version)` sends one request
and reads its answer; one request is in flight at a time. Every failure raises a KafkaError subclass with a message
naming the broker, and closes the connection (its state is unknown after a timeout or a broken frame); a request
that cannot be encoded at that version is refused before sending and leaves the connection as it was. An answer's
buffer grows as its bytes arrive, so a broken peer announcing a huge size costs nothing it does not send.

A session lifetime given by the broker (KIP-368) is honoured by reconnecting before it runs out:
`expired` turns true at 85% of it, and the client then opens a fresh connection.
"""
from __future__ import annotations

import socket
import ssl
import struct
import time

from compatbroker import __version__
from compatbroker.protocol import (API_KEYS, DecodeError, EncodeError, RequestHeader, api_name, decode_response,
                                   encode_request)
from compatbroker.protocol.error_codes import ErrorCode
from compatbroker.protocol.messages.api_versions import ApiVersionsRequest
from compatbroker.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from compatbroker.protocol.messages.sasl_handshake import SaslHandshakeRequest

from .config import ClientConfig
from .errors import KafkaConnectionError, KafkaError, KafkaTimeoutError
from .sasl import mechanism_client

_SIZE = struct.Struct(">i")
API_VERSIONS = 18
SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
PRODUCE = 0
# A response bigger than this is treated as a broken stream rather than buffered (Fetch answers are bounded by
# fetch.max.bytes, 50 MiB by default).
MAX_RESPONSE_BYTES = 512 * 1024 * 1024
FIRST_READ_BYTES = 1024 * 1024
REAUTHENTICATE_AT = 0.85  # of the session lifetime the broker grants


def our_versions(api_key: int) -> tuple[int, int]:
    """The request versions this codec can write for an API key."""
    return API_KEYS[api_key][0].VALID_VERSIONS


class BrokerConnection:
    """A connection to `host:port` (node `node_id`, negative for a bootstrap address). Not thread-safe."""

    def __init__(self, host: str, port: int, config: ClientConfig, node_id: int = -1):
        self.host, self.port, self.node_id = host, port, node_id
        self.config = config
        self.sock: socket.socket | None = None
        self.api_versions: dict[int, tuple[int, int]] = {}
        self.api_versions_response = None
        self._correlation_id = 0
        self.requests_done = 0          # requests answered since open() finished (0: a fresh connection)
        self._session_deadline: float | None = None

    def __repr__(self):
        return f"BrokerConnection({self.describe()})"

    def describe(self) -> str:
        """`host:port (node N)`, for messages."""
        node = f"node {self.node_id}" if self.node_id >= 0 else "bootstrap"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port} ({node})"

    @property
    def connected(self) -> bool:
        return self.sock is not None

    @property
    def expired(self) -> bool:
        """True once the SASL session should be renewed (by opening a new connection)."""
        return self._session_deadline is not None and time.monotonic() >= self._session_deadline

    # --- opening ------------------------------------------------------------------------------------------------

    def open(self) -> BrokerConnection:
        """Connects, negotiates TLS, ApiVersions and SASL. Raises KafkaConnectionError / KafkaTimeoutError /
        KafkaError (SASL_AUTHENTICATION_FAILED, UNSUPPORTED_SASL_MECHANISM, ...)."""
        self.close()
        self.sock = self._connect()
        try:
            if self.config.uses_tls:
                self.sock = self._wrap_tls(self.sock)
            self._negotiate_api_versions()
            if self.config.uses_sasl:
                self._authenticate()
        except BaseException:
            self.close()
            raise
        self.requests_done = 0
        return self

    def _connect(self) -> socket.socket:
        timeout = self.config.connect_timeout_s
        try:
            sock = socket.create_connection((self.host, self.port), timeout=timeout)
        except socket.timeout:
            raise KafkaConnectionError(f"cannot connect to {self.describe()}: no answer within {timeout:g} s "
                                       "(socket.connection.setup.timeout.ms)", unreachable=True) from None
        except OSError as exc:
            reason = exc.strerror or str(exc)
            raise KafkaConnectionError(f"cannot connect to {self.describe()}: {reason} "
                                       "(is a broker listening there?)", unreachable=True) from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def _wrap_tls(self, sock: socket.socket) -> socket.socket:
        cfg = self.config
        try:
            context = ssl.create_default_context(cafile=cfg.ssl_ca_location)
            context.check_hostname = cfg.ssl_check_hostname and cfg.ssl_verify
            if not cfg.ssl_verify:
                context.verify_mode = ssl.CERT_NONE
            if cfg.ssl_certificate_location:
                context.load_cert_chain(cfg.ssl_certificate_location, cfg.ssl_key_location,
                                        password=cfg.ssl_key_password)
        except (OSError, ssl.SSLError) as exc:
            sock.close()
            raise KafkaConnectionError(f"cannot set up TLS for {self.describe()}: {exc}") from None
        sock.settimeout(cfg.connect_timeout_s)
        try:
            return context.wrap_socket(sock, server_hostname=self.host)
        except ssl.SSLCertVerificationError as exc:
            sock.close()
            raise KafkaConnectionError(f"TLS handshake with {self.describe()} failed: {exc.verify_message}") from None
        except (OSError, ssl.SSLError) as exc:
            sock.close()
            raise KafkaConnectionError(f"TLS handshake with {self.describe()} failed: {exc}") from None

    def _negotiate_api_versions(self) -> None:
        version = our_versions(API_VERSIONS)[1]
        request = ApiVersionsRequest(client_software_name="compatbroker", client_software_version=__version__)
        response = self._api_versions_call(request, version)
        if response.error_code == ErrorCode.UNSUPPORTED_VERSION:
            # the broker answered in v0 with its own range of ApiVersions versions: retry with the best common one
            theirs = {entry.api_key: entry.max_version for entry in response.api_keys}.get(API_VERSIONS, 0)
            version = min(theirs, version)
            response = self._api_versions_call(request, version)
        if response.error_code:
            raise KafkaError(response.error_code, f"ApiVersions refused by {self.describe()}")
        self.api_versions = {e.api_key: (e.min_version, e.max_version) for e in response.api_keys}
        self.api_versions_response = response

    def _api_versions_call(self, request, version: int):
        return self.request(request if version >= 3 else ApiVersionsRequest(), version)

    def _authenticate(self) -> None:
        cfg = self.config
        self.version_for(SASL_HANDSHAKE, min_version=1)
        handshake = self.request(SaslHandshakeRequest(mechanism=cfg.sasl_mechanism), 1)
        if handshake.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM:
            offered = ", ".join(handshake.mechanisms) or "none"
            raise KafkaError(handshake.error_code, f"{self.describe()} does not enable SASL mechanism "
                                                   f"{cfg.sasl_mechanism}; it offers: {offered}")
        if handshake.error_code:
            raise KafkaError(handshake.error_code, f"SaslHandshake refused by {self.describe()}")
        mechanism = mechanism_client(cfg.sasl_mechanism, cfg.sasl_username, cfg.sasl_password)
        version = self.version_for(SASL_AUTHENTICATE)
        token = mechanism.first()
        while token is not None:
            response = self.request(SaslAuthenticateRequest(auth_bytes=token), version)
            if response.error_code:
                raise KafkaError(response.error_code, response.error_message or
                                 f"authentication with {cfg.sasl_mechanism} failed at {self.describe()}")
            token = mechanism.next(response.auth_bytes)
            lifetime_ms = response.session_lifetime_ms
        if lifetime_ms > 0:
            self._session_deadline = time.monotonic() + lifetime_ms / 1000 * REAUTHENTICATE_AT

    # --- requests -----------------------------------------------------------------------------------------------

    def version_for(self, api_key: int, *, min_version: int = 0, max_version: int | None = None) -> int:
        """The newest version both this codec and the broker accept, within [min_version, max_version]. Raises
        KafkaError(UNSUPPORTED_VERSION) naming both ranges when there is none."""
        ours = our_versions(api_key)
        theirs = self.api_versions.get(api_key)
        if theirs is not None:
            high = min(ours[1], theirs[1], ours[1] if max_version is None else max_version)
            low = max(ours[0], theirs[0], min_version)
            if low <= high:
                return high
        offered = f"versions {theirs[0]}-{theirs[1]}" if theirs else "no version"
        wanted = f"{max(ours[0], min_version)}-{ours[1] if max_version is None else min(ours[1], max_version)}"
        raise KafkaError(ErrorCode.UNSUPPORTED_VERSION,
                         f"{self.describe()} offers {offered} of {api_name(api_key)}; this client needs {wanted}")

    def request(self, body, version: int, *, timeout_s: float | None = None):
        """Sends `body` as `version` and returns the decoded response body (None for a Produce with acks=0, which
        gets no answer)."""
        if self.sock is None:
            raise KafkaConnectionError(f"the connection to {self.describe()} is closed")
        api_key = body.API_KEY
        self._correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
        header = RequestHeader(request_api_key=api_key, request_api_version=version,
                               correlation_id=self._correlation_id, client_id=self.config.client_id)
        try:
            frame = encode_request(header, body)
        except EncodeError as exc:
            # a field the negotiated version lacks is Kafka's UnsupportedVersionException; anything else is a value
            # the protocol cannot carry (an int out of range, a null where none is allowed)
            code = ErrorCode.UNSUPPORTED_VERSION if "version" in str(exc) else ErrorCode.INVALID_REQUEST
            raise KafkaError(code, f"cannot send {api_name(api_key)} v{version} to {self.describe()}: {exc}") from None
        deadline = time.monotonic() + (timeout_s if timeout_s is not None else self.config.request_timeout_s)
        try:
            self._send(_SIZE.pack(len(frame)) + frame, deadline)
            if api_key == PRODUCE and getattr(body, "acks", -1) == 0:
                return None
            (size,) = _SIZE.unpack(self._receive(_SIZE.size, deadline))
            if not 0 <= size <= MAX_RESPONSE_BYTES:
                raise KafkaConnectionError(f"{self.describe()} announced a response of {size} bytes: not a Kafka "
                                           f"broker, or a {self._protocol_hint()}")
            response = self._decode(api_key, version, self._receive(size, deadline))
        except BaseException:
            self.close()
            raise
        self.requests_done += 1
        return response

    def _decode(self, api_key: int, version: int, frame: bytes):
        try:
            header, response = decode_response(api_key, version, frame)
        except DecodeError as exc:
            if api_key == API_VERSIONS and version > 0:
                # a broker that does not know this ApiVersions version answers in v0 (KIP-511)
                return self._decode(api_key, 0, frame)
            raise KafkaConnectionError(f"could not decode the {api_name(api_key)} v{version} response of "
                                       f"{self.describe()}: {exc}") from None
        if header.correlation_id != self._correlation_id:
            raise KafkaConnectionError(f"{self.describe()} answered correlation id {header.correlation_id}, "
                                       f"expected {self._correlation_id}")
        return response

    def _send(self, data: bytes, deadline: float) -> None:
        try:
            self.sock.settimeout(max(deadline - time.monotonic(), 0.001))
            self.sock.sendall(data)
        except socket.timeout:
            raise self._timed_out() from None
        except OSError as exc:
            raise self._lost(exc) from None

    def _receive(self, count: int, deadline: float) -> bytearray:
        """Exactly `count` bytes into one buffer that grows (doubling) as they arrive, so that a size announced by a
        broken or hostile peer costs memory only for the bytes it really sends."""
        buffer = bytearray(min(count, FIRST_READ_BYTES))
        got = 0
        while got < count:
            if got == len(buffer):
                buffer += bytes(min(count - got, len(buffer)))
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._timed_out()
            try:
                self.sock.settimeout(remaining)
                with memoryview(buffer) as view:
                    received = self.sock.recv_into(view[got:], len(buffer) - got)
            except socket.timeout:
                raise self._timed_out() from None
            except OSError as exc:
                raise self._lost(exc) from None
            if not received:
                raise KafkaConnectionError(f"{self.describe()} closed the connection before answering "
                                           f"({self._protocol_hint()})")
            got += received
        return buffer

    def _lost(self, exc: OSError) -> KafkaConnectionError:
        if isinstance(exc, (ConnectionResetError, BrokenPipeError)):
            return KafkaConnectionError(f"{self.describe()} closed the connection ({exc.strerror or exc}; "
                                        f"{self._protocol_hint()})")
        return KafkaConnectionError(f"lost the connection to {self.describe()}: {exc.strerror or exc}")

    def _timed_out(self) -> KafkaTimeoutError:
        return KafkaTimeoutError(f"{self.describe()} did not answer within {self.config.request_timeout_s:g} s "
                                 "(request.timeout.ms)")

    def _protocol_hint(self) -> str:
        return (f"listener that does not speak security.protocol={self.config.security_protocol}, "
                "or the broker refused the request; see its log")

    def close(self) -> None:
        if self.sock is not None:
            try:
                self.sock.close()
            finally:
                self.sock = None
        self._session_deadline = None

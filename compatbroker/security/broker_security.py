"""The security state of a cluster, which all its nodes share: the settings per listener, the ACLs and their
authorizer, the SCRAM credentials, each listener's TLS context, and new SASL servers for connections.

ACLs and SCRAM credentials are cluster-wide in Kafka (kept in the metadata log); here they are kept in the cluster's
data directory, `acls.json` and `scram-credentials.json`, read at start-up and written atomically on each change.
Nothing is read, and no TLS context built, until something needs it: a broker without TLS, SASL or an authorizer
starts as fast as before.
"""
from __future__ import annotations

import os
import ssl

from .settings import ListenerSecurity, SecuritySettings

ACLS_FILE = "acls.json"
SCRAM_CREDENTIALS_FILE = "scram-credentials.json"


class BrokerSecurity:
    def __init__(self, settings: SecuritySettings, data_dir: str):
        self.settings = settings
        self.data_dir = data_dir
        self._acls = None
        self._scram = None
        self._authorizer = None
        self._ssl_contexts: dict[str, ssl.SSLContext] = {}
        self._opened = False

    def open(self) -> None:
        """Read the persisted ACLs and credentials (at start-up, so that a damaged file stops the start with a
        clear message, not a later request), build the TLS contexts and check the SASL mechanisms' settings (a
        bad key, certificate or JWKS file likewise). Raises ValueError or OSError (ssl.SSLError); idempotent."""
        if self._opened:
            return
        if self.settings.authorizer_enabled:
            _ = self.authorizer
        if any(listener.uses_sasl for listener in self.settings.listeners.values()):
            _ = self.scram
        for name, listener in self.settings.listeners.items():
            if listener.uses_tls:
                self.ssl_context(name)
            if listener.uses_sasl:
                from .sasl import check_listener
                check_listener(listener)
        self._opened = True

    # --- stores ---------------------------------------------------------------------------------------------------

    @property
    def acls(self):
        """The cluster's ACL bindings (security.acls.store.AclStore)."""
        if self._acls is None:
            from .acls.store import AclStore
            self._acls = AclStore.open(os.path.join(self.data_dir, ACLS_FILE))
        return self._acls

    @property
    def authorizer(self):
        """The StandardAuthorizer over `acls`, or None when `authorizer.class.name` is empty (everything allowed)."""
        if self._authorizer is None and self.settings.authorizer_enabled:
            from .acls.authorizer import StandardAuthorizer
            self._authorizer = StandardAuthorizer(
                self.acls, super_users=self.settings.super_users,
                allow_everyone_if_no_acl_found=self.settings.allow_everyone_if_no_acl_found)
        return self._authorizer

    @property
    def scram(self):
        """The SCRAM credentials of the cluster's users (security.scram_credentials.ScramCredentialStore)."""
        if self._scram is None:
            from .scram_credentials import ScramCredentialStore
            self._scram = ScramCredentialStore.open(os.path.join(self.data_dir, SCRAM_CREDENTIALS_FILE))
        return self._scram

    # --- per listener ---------------------------------------------------------------------------------------------

    def listener(self, name: str) -> ListenerSecurity:
        return self.settings.listener(name)

    def ssl_context(self, listener_name: str) -> ssl.SSLContext:
        """The server-side TLS context of an SSL or SASL_SSL listener, built once."""
        context = self._ssl_contexts.get(listener_name)
        if context is None:
            from .tls import build_server_context
            listener = self.listener(listener_name)
            if listener.ssl is None:
                raise ValueError(f"listener {listener_name} ({listener.security_protocol}) does not use TLS")
            context = self._ssl_contexts[listener_name] = build_server_context(listener.ssl)
        return context

    def sasl_server(self, listener_name: str, mechanism: str, *, now_ms: int):
        """A new SASL server (security.sasl) for one authentication on the listener."""
        from .sasl import new_sasl_server
        return new_sasl_server(mechanism, self.listener(listener_name), self.scram, now_ms=now_ms)

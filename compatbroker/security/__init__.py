"""Security: who a connection is, and what it may do.

- authentication: `settings` (Kafka's TLS, SASL and authorization settings, per listener), `tls` and `tls_channel`
  (TLS listeners, client certificates and their principal: `principal_mapping`), `sasl` (PLAIN, SCRAM-SHA-256/512,
  OAUTHBEARER servers as small state machines) run by a connection's `authenticator` before its other requests,
  `scram_credentials` (the users' salted credentials);
- authorization: `acls` (bindings, their store and the StandardAuthorizer's rules), `operations` (which operations
  each resource type has);
- `principal` and `session` (a connection's principal, host and listener), `broker_security` (the one instance a
  cluster's nodes share).

Handlers authorize through `RequestContext.authorize` & co (compatbroker.handlers); the server runs TLS and SASL
(compatbroker.server.connection). This package imports neither.
"""

"""The testing toolkit: what compatbroker offers test suites on top of the broker.

- `embedded`: `EmbeddedBroker`, a broker (or cluster) in a thread or a subprocess of a test suite
  (`from compatbroker import EmbeddedBroker`);
- `security`: `SecuritySetup`, a secured broker's listeners, users, tokens and ACLs and every client family's
  configuration for it, over `certificates` (a throwaway CA and certificates) and `tokens` (OAUTHBEARER tokens,
  JWKS); `dev_tls` is `compatbroker serve --dev-tls`;
- `pytest_plugin`: the `compatbroker`, `compatbroker_fresh` and `compatbroker_secure*` fixtures (the `pytest11`
  entry point);
- `faults`: fault injection and the request log, the server's request hooks (`compatbroker.server.hooks`);
- `control/`: the HTTP/JSON control endpoint (`--control-listen`), its operations (SCRAM users and ACLs included)
  and its Python client;
- `emulation/`: version emulation of Apache Kafka releases (`--emulate`), with the releases' tables;
- `runtime`: how these plug into the server's runtime;
- `testing`: compatbroker in Docker through testcontainers.

The toolkit depends on the core (server, handlers, broker) and the core never imports it: the server calls it
through the interfaces of `compatbroker.server.hooks`. Importing this package loads nothing (the pytest plugin,
loaded in every test run of a project that installs compatbroker, must stay cheap).
"""

"""SASL mechanisms, server side: PLAIN, SCRAM-SHA-256/512 and OAUTHBEARER, with Kafka's rules and messages.

`new_sasl_server(mechanism, listener, scram_store)` makes the server of one authentication exchange; see
mechanism.py for the interface every mechanism implements and how failures reach the client.
"""
from .mechanism import (OAUTHBEARER, PLAIN, SCRAM_SHA_256, SCRAM_SHA_512, SUPPORTED_MECHANISMS,
                        SaslAuthenticationError, SaslCredentialsError, SaslServer, check_listener, new_sasl_server)

__all__ = ["OAUTHBEARER", "PLAIN", "SCRAM_SHA_256", "SCRAM_SHA_512", "SUPPORTED_MECHANISMS",
           "SaslAuthenticationError", "SaslCredentialsError", "SaslServer", "check_listener", "new_sasl_server"]

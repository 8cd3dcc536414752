"""What a handler gets with a request: the broker, the decoded header, and who sent it."""
from __future__ import annotations


class RequestContext:
    __slots__ = ("broker", "header", "api_version", "client_host", "connection_id", "sasl")

    def __init__(self, broker, header, client_host, connection_id, sasl=None):
        self.broker = broker
        self.header = header
        self.api_version = header.api_version
        self.client_host = client_host
        self.connection_id = connection_id
        self.sasl = sasl  # the connection's SaslAuthenticator on a SASL listener, else None

    @property
    def client_id(self):
        return self.header.client_id or ""

"""What a handler gets with a request: the broker, the decoded header, and who sent it - from
where, on which listener, over which security protocol, as which principal (Kafka's
RequestContext: listenerName, securityProtocol, principal), for authorization to use."""
from __future__ import annotations

from .security import ANONYMOUS


class RequestContext:
    __slots__ = ("broker", "header", "api_version", "client_host", "connection_id", "listener_name",
                 "security_protocol", "principal", "sasl", "trusted", "quotas", "mutation_quota")

    def __init__(self, broker, header, client_host, connection_id, listener_name=None, security_protocol="PLAINTEXT",
                 principal=ANONYMOUS, sasl=None, *, trusted=False, quotas=None):
        self.broker = broker
        self.header = header
        self.api_version = header.api_version
        self.client_host = client_host
        self.connection_id = connection_id
        # None: a request from inside the process (the broker's own channel, the embedded
        # clients), answered as on the broker's primary listener
        self.listener_name = listener_name
        self.security_protocol = security_protocol
        self.principal = principal
        self.sasl = sasl  # the connection's SaslAuthenticator on a SASL listener, else None
        # True for the broker's requests to itself (broker/local_channel.py): never refused by ACLs
        self.trusted = trusted
        # the connection's broker/quotas.ClientQuotaSensors while any client quota is set, else None;
        # mutation_quota: the request's controller_mutation_rate quota once a handler asked for it
        self.quotas = quotas
        self.mutation_quota = None

    @property
    def client_id(self):
        return self.header.client_id or ""

    @property
    def answering_listener(self) -> str:
        """The listener whose addresses Metadata, FindCoordinator and DescribeCluster give."""
        return self.listener_name or self.broker.config.primary_listener_name

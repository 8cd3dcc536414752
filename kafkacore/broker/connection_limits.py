"""How many connections the broker holds (Kafka's ConnectionQuotas): ``max.connections`` for
the broker and ``listener.name.<l>.max.connections`` per listener, ``max.connections.per.ip``
with ``max.connections.per.ip.overrides`` per client address.

Kafka's acceptor stops accepting while the broker or a listener is full and closes a connection
over its address's limit at once. Here both close the new connection at once (asyncio accepts
before the protocol sees it; a paused listener would leave clients waiting in the backlog with
no answer): the client sees its connection closed and retries, as it does with Kafka's per-IP
refusal. The inter-broker listener is never refused for the broker's or its own limit, as in
Kafka, so a full broker keeps its replication and controller traffic. Limits are read at each
connection, so a dynamic change of them takes effect for the next one."""
from __future__ import annotations

import logging
from collections import Counter

log = logging.getLogger("kafkacore.broker")


class ConnectionLimits:
    """Kafka's ConnectionQuotas (the name broker/quotas.py's per-connection client quotas took here)."""

    def __init__(self, config):
        self.config = config
        self.total = 0
        self.per_listener: Counter = Counter()
        self.per_ip: Counter = Counter()
        self._refused_ips: set = set()  # logged once per burst of refusals from an address

    def admit(self, ip: str, listener: str) -> str | None:
        """Counts the connection in, or says why it is refused (counted nowhere then)."""
        cfg = self.config
        limit = cfg["max.connections.per.ip.overrides"].get(ip, cfg["max.connections.per.ip"])
        if self.per_ip[ip] >= limit:
            return f"too many connections from {ip} ({limit}, max.connections.per.ip)"
        if listener != cfg.inter_broker_listener_name:
            own = cfg.listener_overrides.get(listener, {}).get("max.connections")
            if own is not None and self.per_listener[listener] >= own:
                return f"listener {listener} is full ({own} connections, listener.name.{listener.lower()}.max.connections)"
            if self.total >= cfg["max.connections"]:
                return f"the broker is full ({cfg['max.connections']} connections, max.connections)"
        self.total += 1
        self.per_listener[listener] += 1
        self.per_ip[ip] += 1
        self._refused_ips.discard(ip)
        return None

    def refused(self, ip: str, why: str) -> None:
        if ip not in self._refused_ips:
            self._refused_ips.add(ip)
            log.info("connection from %s refused: %s (logged once until one is admitted)", ip, why)

    def release(self, ip: str, listener: str) -> None:
        self.total -= 1
        self.per_listener[listener] -= 1
        self.per_ip[ip] -= 1
        if self.per_ip[ip] <= 0:
            del self.per_ip[ip]

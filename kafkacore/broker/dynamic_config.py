"""Dynamic broker configs (Kafka's DynamicBrokerConfig, ZooKeeper mode): configs changed at run
time through AlterConfigs / IncrementalAlterConfigs on BROKER resources, for one broker
(resource name: its id) or as the cluster-wide default (resource name ""), stored as Kafka stores
them in /config/brokers/<id> and /config/brokers/<default> with a change notification every
broker follows (kafkacore/cluster/config_manager.py).

A value's precedence is Kafka's: this broker's dynamic config, then the cluster default, then
the static config (server.properties / --set), then the built-in default. Which keys may change,
and where (Kafka's rules):

- anywhere (per broker or cluster default): the topic defaults (``log.retention.ms``,
  ``log.segment.bytes``, ``message.max.bytes``, ``min.insync.replicas``... every ``log.*`` that
  sets a topic config's default): every log without its own override takes the new value;
  Kafka's thread-pool sizes (``num.io.threads``, ``num.network.threads``, ``num.replica.fetchers``,
  ``num.recovery.threads.per.data.dir``, ``background.threads``) and the cleaner's
  (``log.cleaner.threads`` and its buffers and rate) are accepted and stored for Kafka's tools but
  change nothing here: kafkacore's network and request work is one event loop, its cleaner a
  background pass;
- anywhere: the connection limits (``max.connections``, ``max.connections.per.ip``,
  ``max.connections.per.ip.overrides``, ``max.connection.creation.rate``, and
  ``listener.name.<l>.max.connections`` / ``.max.connection.creation.rate``, Kafka's
  DynamicConnectionQuota): the accept loops follow at once (broker/connection_quotas.py); open
  connections are not closed by a lower limit, as in Kafka;
- per broker only: a listener's key store and trust store (``[listener.name.<l>.]ssl.keystore.*``,
  ``ssl.key.password``, ``ssl.truststore.*``): the listener's TLS context is rebuilt and new
  connections get it (certificates renewed without a restart); existing connections keep theirs.
  Setting the same location again reloads the file, as Kafka does for a renewed key store;
- anything else is INVALID_REQUEST ("Cannot update these configs dynamically"), as Kafka answers
  for its static configs.

Password configs (``ssl.keystore.password``, ``ssl.key.password``, ``ssl.truststore.password``,
``ssl.keystore.key``, bare or listener-prefixed) are stored encrypted, as Kafka stores them, with
``password.encoder.secret`` (security/password_encoder.py): the store holds Kafka's encoded text,
this broker keeps the decoded value. Without the secret an alteration that sets one is refused
as Kafka refuses it (INVALID_REQUEST, "Password encoder secret not configured"); a stored value
this broker cannot decode (another secret) is logged and ignored, as in Kafka, and
``password.encoder.old.secret`` decodes what the previous secret encoded."""
from __future__ import annotations

import logging
import threading

from ..errors import InvalidConfigurationError, InvalidRequestError
from ..security.client_quotas import DEFAULT as DEFAULT_ENTITY  # Kafka's ConfigEntityName.Default
from ..storage.config import BROKER_DEFAULTS
from ..security.password_encoder import PasswordDecodeError
from .config import LISTENER_PREFIX, LISTENER_QUOTA_CONFIGS, BrokerConfig, is_password

log = logging.getLogger("kafkacore.broker")

# ConfigSource of DescribeConfigs (Kafka's DescribeConfigsResponse.ConfigSource)
SOURCE_DYNAMIC_BROKER, SOURCE_DYNAMIC_DEFAULT_BROKER = 2, 3

LOG_DEFAULT_KEYS = frozenset(BROKER_DEFAULTS) | {"log.retention.minutes", "log.retention.hours"}
# accepted and stored, no effect here (docstring)
NO_EFFECT_KEYS = frozenset({
    "num.io.threads", "num.network.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir",
    "background.threads", "log.cleaner.threads", "log.cleaner.io.max.bytes.per.second",
    "log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.size", "log.cleaner.io.buffer.load.factor",
    "log.cleaner.backoff.ms"})
# Kafka's DynamicConnectionQuota.ReconfigurableConfigs
CONNECTION_QUOTA_KEYS = frozenset({"max.connections", "max.connections.per.ip", "max.connections.per.ip.overrides",
                                   "max.connection.creation.rate"})
CLUSTER_WIDE_KEYS = LOG_DEFAULT_KEYS | NO_EFFECT_KEYS | CONNECTION_QUOTA_KEYS
# Kafka's SslConfigs.RECONFIGURABLE_CONFIGS: a key store or trust store, per broker
KEYSTORE_KEYS = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.truststore.type", "ssl.truststore.location",
    "ssl.truststore.password", "ssl.truststore.certificates"})


def _ssl_setting(key):
    """(listener name or None, ssl key) of a key-store key, bare or listener-prefixed; None else."""
    if key in KEYSTORE_KEYS:
        return None, key
    if key.startswith(LISTENER_PREFIX):
        name, _dot, setting = key[len(LISTENER_PREFIX):].partition(".")
        if name and setting in KEYSTORE_KEYS:
            return name.upper(), setting
    return None


def _listener_quota(key) -> bool:
    """listener.name.<l>.max.connections or .max.connection.creation.rate (Kafka's cluster-level
    listener configs)."""
    if not key.startswith(LISTENER_PREFIX):
        return False
    name, _dot, setting = key[len(LISTENER_PREFIX):].partition(".")
    return bool(name) and setting in LISTENER_QUOTA_CONFIGS


def cluster_wide(key) -> bool:
    """May be set as the cluster default as well as per broker."""
    return key in CLUSTER_WIDE_KEYS or _listener_quota(key)


def is_dynamic(key) -> bool:
    return cluster_wide(key) or _ssl_setting(key) is not None


def check_keys(entity, keys, encoder=None) -> None:
    """Kafka's checks of the keys of an alteration (INVALID_REQUEST / INVALID_CONFIG);
    ``encoder``: the broker's PasswordEncoder, None without password.encoder.secret."""
    static = sorted(k for k in keys if not is_dynamic(k))
    if static:
        raise InvalidRequestError(f"Cannot update these configs dynamically: {', '.join(static)}")
    if entity == DEFAULT_ENTITY:
        per_broker = sorted(k for k in keys if not cluster_wide(k))
        if per_broker:
            raise InvalidRequestError("Cannot update these configs at default cluster level, broker id must be "
                                      f"specified: {', '.join(per_broker)}")
    if encoder is None and any(is_password(k) for k in keys):
        name = "" if entity == DEFAULT_ENTITY else entity
        raise InvalidRequestError(f"Invalid config value for resource ConfigResource(type=BROKER, name='{name}'): "
                                  "Password encoder secret not configured")  # Kafka's words


class DynamicBrokerConfig:
    """The dynamic layers over a broker's static config, and their application."""

    def __init__(self, broker):
        self.broker = broker
        self.static_props = dict(broker.config.props)
        self.cluster_default: dict[str, str] = {}
        self.per_broker: dict[str, str] = {}
        self._lock = threading.Lock()  # the handlers' worker threads and the config manager
        # password configs' encryption in the store (static settings, as in Kafka)
        self.encoder = broker.config.password_encoder()
        self.old_encoder = broker.config.password_encoder("password.encoder.old.secret")

    def entity_of(self) -> str:
        return str(self.broker.node_id)

    def configs(self, entity) -> dict:
        return dict(self.cluster_default if entity == DEFAULT_ENTITY else self.per_broker)

    def _effective(self, cluster_default, per_broker) -> BrokerConfig:
        try:
            return BrokerConfig({**self.static_props, **cluster_default, **per_broker})
        except InvalidConfigurationError:
            raise
        except ValueError as e:  # a validator's own message
            raise InvalidConfigurationError(str(e)) from None

    def validate(self, entity, configs, reload_keys=()) -> tuple:
        """(effective BrokerConfig, rebuilt TLS listeners) if the entity's configs became
        ``configs``; INVALID_CONFIG naming the key at fault otherwise. ``reload_keys``: key-store
        keys named by the request, whose listeners are rebuilt even when the value is the same."""
        check_keys(entity, configs, self.encoder)
        cluster_default = configs if entity == DEFAULT_ENTITY else self.cluster_default
        per_broker = self.per_broker if entity == DEFAULT_ENTITY else configs
        effective = self._effective(cluster_default, per_broker)
        return effective, self._rebuilt_tls(effective, reload_keys)

    def _rebuilt_tls(self, effective, reload_keys):
        """{listener: ListenerTls} of the TLS listeners whose key-store settings change (or are
        named by the request): their new contexts, built now so that a bad file fails the request."""
        from .tls import listener_tls
        current = self.broker.config
        listeners = getattr(self.broker, "listener_tls", None) or {}
        named = {(_ssl_setting(k) or (None, None))[0] for k in reload_keys}
        out = {}
        for name in listeners:
            if effective.ssl_settings(name) == current.ssl_settings(name) and name not in named and None not in named:
                continue
            out[name] = listener_tls(name, effective.ssl_settings(name),
                                     frozenset(effective.listener_overrides.get(name, ())))
        return out

    def alter(self, entity, configs, store, reload_keys=(), validate_only=False):
        """An AlterConfigs of the BROKER resource: checked, stored (``store(entity, configs)``:
        the metadata store's write and notification) and applied here."""
        with self._lock:
            effective, tls = self.validate(entity, configs, reload_keys)
            if validate_only:
                return
            store(entity, {k: self.encoder.encode(v) if is_password(k) else v for k, v in configs.items()})
            if entity == DEFAULT_ENTITY:
                self.cluster_default = dict(configs)
            else:
                self.per_broker = dict(configs)
            self._apply(effective, tls)

    def reload(self, cluster_default, per_broker):
        """The stored layers (start-up, or another broker's change): applied when valid; a
        layer written by another tool that this broker cannot apply is logged and skipped."""
        with self._lock:
            cluster_default = self._decoded(DEFAULT_ENTITY, cluster_default)
            per_broker = self._decoded(self.entity_of(), per_broker)
            if (cluster_default, per_broker) == (self.cluster_default, self.per_broker):
                return
            try:
                effective = self._effective(cluster_default, per_broker)
                tls = self._rebuilt_tls(effective, [k for k in per_broker if _ssl_setting(k)])
            except InvalidConfigurationError as e:
                log.error("broker %d: dynamic broker configs not applied: %s", self.broker.node_id, e.message)
                return
            self.cluster_default, self.per_broker = cluster_default, per_broker
            self._apply(effective, tls)

    def _decoded(self, entity, stored) -> dict:
        """A stored layer as this broker applies it: the keys it may apply, passwords decoded
        (with the old secret when the current one cannot); the rest logged and left out."""
        out = {}
        for key, value in stored.items():
            if not self._usable(entity, key):
                continue
            if is_password(key) and value is not None:
                value = self._decode(key, value)
                if value is None:
                    continue
            out[key] = value
        return out

    def _decode(self, key, value):
        for encoder in (self.encoder, self.old_encoder):
            if encoder is not None:
                try:
                    return encoder.decode(value)
                except PasswordDecodeError:
                    continue
        log.error("broker %d: dynamic password config %s could not be decoded, ignoring (password.encoder.secret "
                  "is not the one it was stored with)", self.broker.node_id, key)
        return None

    def _usable(self, entity, key):
        try:
            check_keys(entity, [key], self.encoder)
            return True
        except (InvalidRequestError, InvalidConfigurationError) as e:
            log.warning("broker %d: dynamic config %s of %s ignored: %s", self.broker.node_id, key, entity,
                        e.message)
            return False

    def _apply(self, effective, tls):
        """The effective config into the running broker: topic defaults into every log, key
        stores into the TLS listeners, the values into the broker's config object."""
        broker = self.broker
        cfg = broker.config
        # only what may change: the rest of the config object (its listeners as the command line
        # set them...) stays as it started
        for key in set(cfg.props) | set(effective.props):
            if is_dynamic(key):
                if key in effective.props:
                    cfg.props[key] = effective.props[key]
                else:
                    cfg.props.pop(key, None)
        for key in CLUSTER_WIDE_KEYS | KEYSTORE_KEYS:
            if key in effective.values:
                cfg.values[key] = effective.values[key]
        cfg.listener_overrides = effective.listener_overrides
        if cfg.log_config.describe() != effective.log_config.describe():
            cfg.log_config = effective.log_config
            broker.log_manager.set_default_config(effective.log_config)
        quotas = broker.connection_quotas
        if quotas is not None:
            broker.loop.call_soon_threadsafe(quotas.reconfigure, cfg)
        listeners = getattr(broker, "listener_tls", None) or {}
        for name, new in tls.items():
            listeners[name].context = new.context  # new connections; open ones keep their session
            log.info("broker %d: listener %s: key store reloaded", broker.node_id, name)
        log.info("broker %d: dynamic configs now %s (cluster default) and %s (this broker)", broker.node_id,
                 sorted(self.cluster_default), sorted(self.per_broker))

    def source(self, key):
        """[(value, ConfigSource)] of the dynamic layers that set ``key``, highest first."""
        out = []
        if key in self.per_broker:
            out.append((self.per_broker[key], SOURCE_DYNAMIC_BROKER))
        if key in self.cluster_default:
            out.append((self.cluster_default[key], SOURCE_DYNAMIC_DEFAULT_BROKER))
        return out

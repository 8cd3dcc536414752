"""The SCRAM credentials every broker holds in memory (Kafka's CredentialCache), filled from the
users' config entities in the metadata store (/config/users/<sanitized user>, one config per
mechanism: ``"SCRAM-SHA-256": "salt=...,stored_key=...,server_key=...,iterations=4096"``) at
start-up and on each change notification, so any broker authenticates a user the moment
AlterUserScramCredentials has written them anywhere.

User names are stored as Kafka's Sanitizer writes them: URL-encoded (UTF-8, upper-case hex), with
only letters, digits, '.', '-' and '_' left as they are."""
from __future__ import annotations

import logging
import threading
from urllib.parse import quote, unquote

from .scram import MECHANISMS, ScramCredential

log = logging.getLogger("kafkacore.security")


def sanitize(name: str) -> str:
    """Kafka's Sanitizer.sanitize: a user name as a znode name."""
    return quote(name, safe="-._").replace("~", "%7E")


def desanitize(name: str) -> str:
    return unquote(name)


class CredentialCache:
    def __init__(self):
        self._lock = threading.Lock()
        self._users: dict[str, dict[str, ScramCredential]] = {}  # user -> {mechanism: credential}

    def get(self, mechanism: str, user: str) -> ScramCredential | None:
        creds = self._users.get(user)
        return None if creds is None else creds.get(mechanism)

    def mechanisms_of(self, user: str) -> dict[str, ScramCredential]:
        return dict(self._users.get(user, {}))

    def users(self) -> list[str]:
        return sorted(self._users)

    def update_user(self, user: str, configs: dict) -> None:
        """The user's whole config entity, as stored: its SCRAM entries replace what was held (a
        mechanism absent from it is deleted). An entry that does not parse is skipped with an
        error line naming the user and mechanism (never the entry)."""
        creds = {}
        for mechanism in MECHANISMS:
            text = configs.get(mechanism)
            if text is None:
                continue
            try:
                creds[mechanism] = ScramCredential.from_config_value(text)
            except ValueError as e:
                log.error("user %s: stored %s credential ignored: %s", user, mechanism, e)
        with self._lock:
            if creds:
                self._users[user] = creds
            else:
                self._users.pop(user, None)

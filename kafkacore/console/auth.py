"""The console's own login (``--users FILE``): password hashes, the users file, and sessions.

The users file holds one ``name:hash`` or ``name:hash:read-only`` line per user (``#`` starts a
comment). A hash is ``scrypt$N$r$p$SALT$KEY`` (salt and key in base64): scrypt, from the
standard library, is slow and memory-hard on purpose, and the per-user random salt makes equal
passwords hash differently, so a stolen file has to be attacked one user at a time.
``kafkacore console hash-password NAME`` prints such a line.

Sessions live in this process only (a restart logs everyone out): a random 32-byte token in an
HttpOnly, SameSite=Strict cookie names one, and one unused for IDLE_TIMEOUT_S is forgotten.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass

# scrypt's cost: 2**15 * 8 * 128 bytes = 32 MiB of memory and ~0.1 s per guess
SCRYPT_N, SCRYPT_R, SCRYPT_P = 2 ** 15, 8, 1
MAX_SCRYPT_N = 2 ** 20  # a file asking for more would make every login (and the start) crawl
SALT_BYTES, KEY_BYTES = 16, 32
READ_ONLY_ROLE, READ_WRITE_ROLE = "read-only", "read-write"
TOKEN_BYTES = 32
IDLE_TIMEOUT_S = 8 * 3600


class UsersFileError(Exception):
    """A users file that cannot be read or has a bad line: one sentence, with file:line."""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _scrypt(password: str, salt: bytes, n: int, r: int, p: int) -> bytes:
    # maxmem: the default (32 MiB) is exactly scrypt's need at N=2**15, r=8, and too little
    return hashlib.scrypt(password.encode("utf-8"), salt=salt, n=n, r=r, p=p, dklen=KEY_BYTES,
                          maxmem=128 * n * r * p + 16 * 1024 * 1024)


def hash_password(password: str) -> str:
    """``scrypt$N$r$p$SALT$KEY`` for ``password`` with a fresh random salt."""
    salt = secrets.token_bytes(SALT_BYTES)
    key = _scrypt(password, salt, SCRYPT_N, SCRYPT_R, SCRYPT_P)
    return f"scrypt${SCRYPT_N}${SCRYPT_R}${SCRYPT_P}${_b64(salt)}${_b64(key)}"


@dataclass(frozen=True)
class PasswordHash:
    n: int
    r: int
    p: int
    salt: bytes
    key: bytes

    @classmethod
    def parse(cls, text: str) -> "PasswordHash":
        """ValueError (with the reason) unless ``text`` is a hash hash_password made."""
        parts = text.split("$")
        if len(parts) != 6 or parts[0] != "scrypt":
            raise ValueError("the hash is not scrypt$N$r$p$salt$key (make one with: kafkacore console hash-password)")
        try:
            n, r, p = int(parts[1]), int(parts[2]), int(parts[3])
            salt = base64.b64decode(parts[4], validate=True)
            key = base64.b64decode(parts[5], validate=True)
        except ValueError:
            raise ValueError("the hash's numbers or base64 parts are malformed") from None
        if n < 2 or n & (n - 1) or n > MAX_SCRYPT_N or not 1 <= r <= 64 or not 1 <= p <= 16:
            raise ValueError(f"scrypt parameters N={n} r={r} p={p} are out of range")
        if len(salt) < 8 or len(key) < 16:
            raise ValueError("the hash's salt or key is too short")
        return cls(n, r, p, salt, key)

    def matches(self, password: str) -> bool:
        """Slow on purpose (scrypt); the comparison takes the same time wherever keys differ."""
        return hmac.compare_digest(_scrypt(password, self.salt, self.n, self.r, self.p)[:len(self.key)], self.key)


@dataclass(frozen=True)
class User:
    name: str
    password: PasswordHash
    read_only: bool


def read_users(path: str) -> dict:
    """{name: User} from a users file; UsersFileError for an unreadable file or a bad line."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise UsersFileError(f"cannot read --users {path}: {getattr(e, 'strerror', None) or e}") from None
    users = {}
    for number, line in enumerate(lines, 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        # (the line itself is never quoted back: a plaintext password pasted by mistake would
        # end up on the terminal and in logs)
        where = f"--users {path}:{number}"
        fields = line.split(":")
        if len(fields) not in (2, 3):
            raise UsersFileError(f"{where}: expected name:hash or name:hash:{READ_ONLY_ROLE}")
        name, hashed = fields[0].strip(), fields[1].strip()
        role = fields[2].strip() if len(fields) == 3 else READ_WRITE_ROLE
        if not name or any(c.isspace() for c in name):
            raise UsersFileError(f"{where}: the user name is empty or holds spaces")
        if role not in (READ_ONLY_ROLE, READ_WRITE_ROLE):
            raise UsersFileError(f"{where}: the role must be {READ_ONLY_ROLE} or {READ_WRITE_ROLE}, not {role!r}")
        if name in users:
            raise UsersFileError(f"{where}: user {name!r} is listed twice")
        try:
            password = PasswordHash.parse(hashed)
        except ValueError as e:
            raise UsersFileError(f"{where}: {e}") from None
        users[name] = User(name, password, role == READ_ONLY_ROLE)
    if not users:
        raise UsersFileError(f"--users {path} lists no users: nobody could log in")
    return users


class Authenticator:
    """Checks a name and password against the users file's hashes. A name not in the file is
    checked against a hash of a random password, so an unknown user costs the same scrypt
    time as a wrong password and the answer's timing does not tell which it was."""

    def __init__(self, users: dict):
        self.users = users
        self._decoy = PasswordHash.parse(hash_password(secrets.token_urlsafe(16)))

    def check(self, name: str, password: str) -> User | None:
        user = self.users.get(name)
        ok = (user.password if user else self._decoy).matches(password)
        return user if ok and user is not None else None


@dataclass
class Session:
    user: str
    read_only: bool
    last_used: float


class SessionStore:
    """Sessions by token, in memory. A session unused for ``idle_s`` ends; looking one up
    counts as using it."""

    def __init__(self, idle_s: float = IDLE_TIMEOUT_S, clock=time.monotonic):
        self.idle_s = idle_s
        self.clock = clock
        self._sessions = {}

    def create(self, user: User) -> str:
        self._prune()
        token = secrets.token_urlsafe(TOKEN_BYTES)
        self._sessions[token] = Session(user.name, user.read_only, self.clock())
        return token

    def get(self, token: str) -> Session | None:
        session = self._sessions.get(token) if token else None
        if session is None:
            return None
        now = self.clock()
        if now - session.last_used > self.idle_s:
            del self._sessions[token]
            return None
        session.last_used = now
        return session

    def end(self, token: str) -> None:
        self._sessions.pop(token, None)

    def _prune(self):
        now = self.clock()
        for token in [t for t, s in self._sessions.items() if now - s.last_used > self.idle_s]:
            del self._sessions[token]

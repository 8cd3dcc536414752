"""Password configs stored encrypted, as Kafka stores dynamic password configs in ZooKeeper
(its EncryptingPasswordEncoder, KIP-226): a key derived from ``password.encoder.secret`` by
PBKDF2 over a random 256-byte salt encrypts the password with AES, and the stored text is
Kafka's comma-separated ``name:value`` list, so a broker of either kind reads what the other
wrote with the same secret:

    keyFactoryAlgorithm:PBKDF2WithHmacSHA512,cipherAlgorithm:AES/CBC/PKCS5Padding,keyLength:128,
    salt:<base64>,iterations:4096,encryptedPassword:<base64>,passwordLength:<n>,
    initializationVector:<base64>[,authenticationTagLength:<bits> for GCM]

The settings and their defaults are Kafka's (``password.encoder.keyfactory.algorithm``: none,
which means PBKDF2WithHmacSHA512; ``.cipher.algorithm`` AES/CBC/PKCS5Padding; ``.key.length``
128 bits; ``.iterations`` 4096). What Java's providers offer and Python has too is supported:
PBKDF2 with HMAC-SHA512/256/1, and AES in CBC (PKCS#5 padding) or GCM (no padding); anything
else is refused when the broker starts. ``passwordLength`` is Java's String length (UTF-16
code units), Kafka's sanity check after decryption. The AES itself comes from the
``cryptography`` package (the ``security`` extra, already needed for PKCS12 key stores).
"""
from __future__ import annotations

import base64
import hashlib
import os

from ..errors import InvalidConfigurationError

# the names of the stored fields (Kafka's PasswordEncoder constants)
KEY_FACTORY_ALGORITHM = "keyFactoryAlgorithm"
CIPHER_ALGORITHM = "cipherAlgorithm"
KEY_LENGTH = "keyLength"
SALT = "salt"
ITERATIONS = "iterations"
ENCRYPTED_PASSWORD = "encryptedPassword"
PASSWORD_LENGTH = "passwordLength"
INITIALIZATION_VECTOR = "initializationVector"
AUTHENTICATION_TAG_LENGTH = "authenticationTagLength"

DEFAULT_KEY_FACTORY = "PBKDF2WithHmacSHA512"  # Kafka's choice when the setting is empty
KEY_FACTORIES = {"PBKDF2WithHmacSHA512": "sha512", "PBKDF2WithHmacSHA256": "sha256", "PBKDF2WithHmacSHA1": "sha1"}
CIPHERS = ("AES/CBC/PKCS5Padding", "AES/GCM/NoPadding")
SALT_BYTES = 256  # Kafka's
GCM_IV_BYTES = 12  # what Java's GCM cipher makes when given none
GCM_TAG_BITS = 128


class PasswordDecodeError(Exception):
    """A stored password that this secret cannot decode (wrong secret, damaged text)."""


def _java_length(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


class PasswordEncoder:
    def __init__(self, secret: str, key_factory_algorithm: str | None = None,
                 cipher_algorithm: str = CIPHERS[0], key_length: int = 128, iterations: int = 4096):
        self._secret = secret.encode("utf-8")  # Java's PBKDF2 takes the secret's chars as UTF-8
        self.key_factory_algorithm = key_factory_algorithm or DEFAULT_KEY_FACTORY
        self.cipher_algorithm = cipher_algorithm
        self.key_length = key_length
        self.iterations = iterations
        check_algorithms(self.key_factory_algorithm, cipher_algorithm, key_length)

    def __repr__(self):  # never the secret
        return f"PasswordEncoder({self.key_factory_algorithm}, {self.cipher_algorithm}, {self.key_length})"

    def _key(self, key_factory, salt, iterations, key_length) -> bytes:
        return hashlib.pbkdf2_hmac(KEY_FACTORIES[key_factory], self._secret, salt, iterations, key_length // 8)

    def encode(self, password: str) -> str:
        from cryptography.hazmat.primitives import padding
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        salt = os.urandom(SALT_BYTES)
        key = self._key(self.key_factory_algorithm, salt, self.iterations, self.key_length)
        data = password.encode("utf-8")
        fields = {KEY_FACTORY_ALGORITHM: self.key_factory_algorithm, CIPHER_ALGORITHM: self.cipher_algorithm,
                  KEY_LENGTH: str(self.key_length), SALT: _b64(salt), ITERATIONS: str(self.iterations)}
        if self.cipher_algorithm.startswith("AES/GCM/"):
            iv = os.urandom(GCM_IV_BYTES)
            encrypted = AESGCM(key).encrypt(iv, data, None)  # ciphertext then tag, as Java's GCM
            fields[AUTHENTICATION_TAG_LENGTH] = str(GCM_TAG_BITS)
        else:
            iv = os.urandom(16)
            padder = padding.PKCS7(128).padder()
            encryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).encryptor()
            encrypted = encryptor.update(padder.update(data) + padder.finalize()) + encryptor.finalize()
        fields.update({ENCRYPTED_PASSWORD: _b64(encrypted), PASSWORD_LENGTH: str(_java_length(password)),
                       INITIALIZATION_VECTOR: _b64(iv)})
        return ",".join(f"{k}:{v}" for k, v in fields.items())

    def decode(self, encoded: str) -> str:
        """The password, or PasswordDecodeError (Kafka's "Password could not be decoded")."""
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives import padding
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        try:
            fields = dict(item.split(":", 1) for item in encoded.split(","))
            key_factory = fields.get(KEY_FACTORY_ALGORITHM) or DEFAULT_KEY_FACTORY
            cipher, key_length = fields[CIPHER_ALGORITHM], int(fields[KEY_LENGTH])
            check_algorithms(key_factory, cipher, key_length)
            key = self._key(key_factory, base64.b64decode(fields[SALT], validate=True), int(fields[ITERATIONS]),
                            key_length)
            encrypted = base64.b64decode(fields[ENCRYPTED_PASSWORD], validate=True)
            iv = base64.b64decode(fields[INITIALIZATION_VECTOR], validate=True)
            if cipher.startswith("AES/GCM/"):
                data = AESGCM(key).decrypt(iv, encrypted, None)
            else:
                decryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).decryptor()
                unpadder = padding.PKCS7(128).unpadder()
                data = unpadder.update(decryptor.update(encrypted) + decryptor.finalize()) + unpadder.finalize()
            password = data.decode("utf-8")
            expected = int(fields[PASSWORD_LENGTH])
        except (ValueError, KeyError, TypeError, InvalidTag, InvalidConfigurationError):
            raise PasswordDecodeError("Password could not be decoded") from None
        if _java_length(password) != expected:
            raise PasswordDecodeError("Password could not be decoded, sanity check of length failed")
        return password


def check_algorithms(key_factory: str, cipher: str, key_length: int) -> None:
    """InvalidConfigurationError (one line) for a combination this encoder cannot do."""
    if key_factory not in KEY_FACTORIES:
        raise InvalidConfigurationError(f"password.encoder.keyfactory.algorithm={key_factory!r}: one of "
                                        f"{', '.join(KEY_FACTORIES)}")
    if cipher not in CIPHERS:
        raise InvalidConfigurationError(f"password.encoder.cipher.algorithm={cipher!r}: one of {', '.join(CIPHERS)}")
    if key_length not in (128, 192, 256):
        raise InvalidConfigurationError(f"password.encoder.key.length={key_length}: AES takes 128, 192 or 256")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")

"""Dynamic password configs stored as Kafka stores them (security/password_encoder.py): the
encoded text's fields and Kafka's defaults, round trips through AES-CBC and AES-GCM, Java's
length check in UTF-16 units, a wrong secret or a damaged value refused in one line, and the
broker's settings checked at start-up. The broker side (AlterConfigs, DescribeConfigs, a
restart): tests/test_broker_dynamic_config.py."""
from __future__ import annotations

import base64

import pytest

from kafkacore.broker.config import BrokerConfig
from kafkacore.errors import InvalidConfigurationError
from kafkacore.security.password_encoder import PasswordDecodeError, PasswordEncoder

SECRET = "an-encoder-secret"


def _fields(encoded):
    return dict(item.split(":", 1) for item in encoded.split(","))


def test_kafkas_defaults_and_fields():
    encoder = BrokerConfig({"password.encoder.secret": SECRET}).password_encoder()
    encoded = encoder.encode("key-pass")
    f = _fields(encoded)
    assert (f["keyFactoryAlgorithm"], f["cipherAlgorithm"], f["keyLength"], f["iterations"]) == (
        "PBKDF2WithHmacSHA512", "AES/CBC/PKCS5Padding", "128", "4096")
    assert len(base64.b64decode(f["salt"])) == 256 and len(base64.b64decode(f["initializationVector"])) == 16
    assert f["passwordLength"] == "8" and len(base64.b64decode(f["encryptedPassword"])) == 16  # one AES block
    assert "key-pass" not in encoded
    assert encoder.decode(encoded) == "key-pass"
    assert encoder.encode("key-pass") != encoded  # a new salt and IV each time
    assert BrokerConfig({}).password_encoder() is None


@pytest.mark.parametrize("cipher,factory,length", [("AES/GCM/NoPadding", "PBKDF2WithHmacSHA256", 256),
                                                   ("AES/CBC/PKCS5Padding", "PBKDF2WithHmacSHA1", 192)])
def test_other_ciphers_and_key_factories(cipher, factory, length):
    encoder = PasswordEncoder(SECRET, factory, cipher, length, 1024)
    password = "p\u00e4ss \U0001F511 w\u00f6rd"  # a non-BMP character counts 2, as Java's String.length
    encoded = encoder.encode(password)
    f = _fields(encoded)
    assert f["passwordLength"] == str(len(password) + 1)
    if cipher.startswith("AES/GCM/"):
        assert f["authenticationTagLength"] == "128" and len(base64.b64decode(f["initializationVector"])) == 12
    # decoding follows the stored fields, whatever this broker's own settings
    assert PasswordEncoder(SECRET).decode(encoded) == password


def test_a_wrong_secret_or_a_damaged_value_is_refused():
    encoded = PasswordEncoder(SECRET).encode("key-pass")
    with pytest.raises(PasswordDecodeError, match="^Password could not be decoded$"):
        PasswordEncoder("another-secret").decode(encoded)
    f = _fields(encoded)
    for damaged in [{**f, "passwordLength": "9"}, {**f, "encryptedPassword": "!!"}, {**f, "cipherAlgorithm": "DES"},
                    {k: v for k, v in f.items() if k != "salt"}]:
        with pytest.raises(PasswordDecodeError, match="^Password could not be decoded"):
            PasswordEncoder(SECRET).decode(",".join(f"{k}:{v}" for k, v in damaged.items()))
    with pytest.raises(PasswordDecodeError):
        PasswordEncoder(SECRET).decode("not an encoded password")


@pytest.mark.parametrize("props,message", [
    ({"password.encoder.cipher.algorithm": "DES/CBC/PKCS5Padding"},
     "password.encoder.cipher.algorithm='DES/CBC/PKCS5Padding': one of AES/CBC/PKCS5Padding, AES/GCM/NoPadding"),
    ({"password.encoder.keyfactory.algorithm": "PBKDF2WithHmacMD5"},
     "password.encoder.keyfactory.algorithm='PBKDF2WithHmacMD5': one of PBKDF2WithHmacSHA512"),
    ({"password.encoder.key.length": "100"}, "password.encoder.key.length=100: AES takes 128, 192 or 256"),
    ({"password.encoder.iterations": "10"}, "password.encoder.iterations='10': must be between 1024"),
])
def test_bad_encoder_settings_are_one_line(props, message):
    with pytest.raises(InvalidConfigurationError) as e:
        BrokerConfig({"password.encoder.secret": SECRET, **props})
    assert message in e.value.message and SECRET not in e.value.message and "\n" not in e.value.message

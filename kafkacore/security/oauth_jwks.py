"""OAUTHBEARER with signed tokens: the broker's validator of KIP-768 (Kafka's
OAuthBearerValidatorCallbackHandler), which checks a JSON Web Token's signature against the keys
of a JSON Web Key Set, then its claims.

Turned on per listener as Kafka does:
``listener.name.<l>.oauthbearer.sasl.server.callback.handler.class=
org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler``, with

- ``sasl.oauthbearer.jwks.endpoint.url``: ``file:///path/to/jwks.json`` or an ``https://`` (or
  ``http://``) URL of the identity provider's key set;
- ``sasl.oauthbearer.jwks.endpoint.refresh.ms`` (1 hour): the key set is fetched again that
  often, and at once (at most every ``...retry.backoff.ms``, 100 ms, doubling to
  ``...retry.backoff.max.ms``, 10 s, while fetches fail) when a token names an unknown key - a
  provider rotating its keys is followed without a restart. A URL is fetched by a background
  thread, never on the event loop: a token whose key is not known yet is refused, and the client
  logs in again;
- ``sasl.oauthbearer.expected.audience`` (a list: the token's ``aud`` must name one of them) and
  ``sasl.oauthbearer.expected.issuer`` (``iss``), checked when set;
- ``sasl.oauthbearer.sub.claim.name`` (``sub``): the principal; ``sasl.oauthbearer.scope.claim.name``
  (``scope``); ``sasl.oauthbearer.clock.skew.seconds`` (30) for ``exp``, ``iat`` and ``nbf``.

Signatures: RS256/384/512, PS256/384/512 and ES256/384/512 (RFC 7518), checked with
``cryptography`` (the ``security`` extra). ``alg: none`` and HMAC algorithms are refused: a
broker holds no shared secret. The token must name its key (``kid``) unless the set has exactly
one key."""
from __future__ import annotations

import base64
import json
import logging
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable

from ..errors import InvalidConfigurationError
from .oauthbearer import TokenValidationError, ValidatedToken, claim_time_ms

log = logging.getLogger("kafkacore.security")

# Kafka's class names that select this validator (4.x, and the 3.x package before it moved)
VALIDATOR_CLASSES = frozenset({
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler"})
FETCH_TIMEOUT_S = 10.0

_HASHES = {"256": "SHA256", "384": "SHA384", "512": "SHA512"}
_EC_CURVES = {"P-256": ("SECP256R1", 32), "P-384": ("SECP384R1", 48), "P-521": ("SECP521R1", 66)}


def _b64url(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def _b64url_int(text: str) -> int:
    return int.from_bytes(_b64url(text), "big")


def _crypto():
    try:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa, utils
    except ImportError:
        raise InvalidConfigurationError(
            "sasl.oauthbearer.jwks.endpoint.url: signed OAUTHBEARER tokens need the 'cryptography' package "
            "(pip install 'kafkacore[security]')") from None
    return InvalidSignature, hashes, ec, padding, rsa, utils


class JsonWebKey:
    """One verification key of a key set."""

    def __init__(self, jwk: dict):
        _InvalidSignature, _hashes, ec, _padding, rsa, _utils = _crypto()
        self.kid = jwk.get("kid")
        self.alg = jwk.get("alg")
        kty = jwk.get("kty")
        try:
            if kty == "RSA":
                self.key = rsa.RSAPublicNumbers(_b64url_int(jwk["e"]), _b64url_int(jwk["n"])).public_key()
                self.size = None
            elif kty == "EC":
                curve_name, self.size = _EC_CURVES[jwk["crv"]]
                curve = getattr(ec, curve_name)()
                self.key = ec.EllipticCurvePublicNumbers(_b64url_int(jwk["x"]), _b64url_int(jwk["y"]),
                                                         curve).public_key()
            else:
                raise ValueError(f"key type {kty!r} is not RSA or EC")
        except (KeyError, ValueError, TypeError) as e:
            raise ValueError(f"key {self.kid!r}: {e}") from None
        self.kty = kty

    def verify(self, alg: str, signing_input: bytes, signature: bytes) -> bool:
        InvalidSignature, hashes, ec, padding, _rsa, utils = _crypto()
        family, bits = alg[:2], alg[2:]
        if bits not in _HASHES or (self.alg and self.alg != alg):
            return False
        digest = getattr(hashes, _HASHES[bits])()
        try:
            if family == "RS" and self.kty == "RSA":
                self.key.verify(signature, signing_input, padding.PKCS1v15(), digest)
            elif family == "PS" and self.kty == "RSA":
                self.key.verify(signature, signing_input,
                                padding.PSS(mgf=padding.MGF1(digest), salt_length=digest.digest_size), digest)
            elif family == "ES" and self.kty == "EC":
                if len(signature) != 2 * self.size:
                    return False
                r = int.from_bytes(signature[:self.size], "big")
                s = int.from_bytes(signature[self.size:], "big")
                self.key.verify(utils.encode_dss_signature(r, s), signing_input, ec.ECDSA(digest))
            else:
                return False
        except InvalidSignature:
            return False
        return True


def parse_jwks(data: bytes) -> dict:
    """{kid: JsonWebKey} of a key set (a key without kid under None); keys for other uses
    ("use": "enc") and of other types are skipped."""
    try:
        keys = json.loads(data)["keys"]
        if not isinstance(keys, list):
            raise TypeError
    except (ValueError, KeyError, TypeError):
        raise ValueError("not a JSON Web Key Set (an object with a \"keys\" list)") from None
    out = {}
    for jwk in keys:
        if not isinstance(jwk, dict) or jwk.get("use", "sig") != "sig" or jwk.get("kty") not in ("RSA", "EC"):
            continue
        key = JsonWebKey(jwk)
        out[key.kid] = key
    if not out:
        raise ValueError("the key set holds no RSA or EC signing key")
    return out


class JwksSource:
    """The key set of a URL, fetched again every refresh interval and when a token names an
    unknown key (rate-limited with a doubling backoff)."""

    def __init__(self, url: str, refresh_ms: int, backoff_ms: int, backoff_max_ms: int,
                 fetch: Callable[[str], bytes] | None = None, clock: Callable[[], float] = time.monotonic):
        self.url = url
        self.refresh_s = refresh_ms / 1000
        self.backoff_s, self.backoff_max_s = backoff_ms / 1000, max(backoff_ms, backoff_max_ms) / 1000
        self._fetch = fetch or _fetch_url
        self._clock = clock
        self._lock = threading.Lock()
        self.keys: dict = {}
        self._fetched_at = -1e18
        self._next_try = -1e18
        self._failures = 0
        self._fetching = False
        self.blocking = url.startswith("file:")  # a file is read in place; a URL off the event loop
        self.refresh()  # at start: a key set that cannot be read stops the broker in one line

    def refresh(self) -> None:
        try:
            keys = parse_jwks(self._fetch(self.url))
        except (OSError, ValueError) as e:
            with self._lock:
                self._failures += 1
                wait = min(self.backoff_s * 2 ** (self._failures - 1), self.backoff_max_s)
                self._next_try = self._clock() + wait
            if not self.keys:
                raise InvalidConfigurationError(f"sasl.oauthbearer.jwks.endpoint.url={self.url!r}: {e}") from None
            log.warning("OAUTHBEARER key set %s not refreshed (%s); keeping %d keys", self.url, e, len(self.keys))
            return
        with self._lock:
            self.keys = keys
            self._fetched_at = self._clock()
            self._failures = 0
            self._next_try = self._clock() + self.backoff_s

    def key(self, kid):
        """The key a token names, or None; an unknown key or a stale set triggers a refresh."""
        now = self._clock()
        stale = now - self._fetched_at >= self.refresh_s
        found = self.keys.get(kid) if kid is not None else (
            next(iter(self.keys.values())) if len(self.keys) == 1 else None)
        if (found is None or stale) and now >= self._next_try:
            self._refresh_soon()
            keys = self.keys
            found = keys.get(kid) if kid is not None else (next(iter(keys.values())) if len(keys) == 1 else None)
        return found

    def _refresh_soon(self):
        if self.blocking:
            self.refresh()
            return
        with self._lock:
            if self._fetching:
                return
            self._fetching = True
            self._next_try = self._clock() + self.backoff_s

        def run():
            try:
                self.refresh()
            finally:
                self._fetching = False
        threading.Thread(target=run, name="kafkacore-jwks-refresh", daemon=True).start()


def _fetch_url(url: str) -> bytes:
    if url.startswith("file:"):
        with open(urllib.request.url2pathname(urllib.parse.urlparse(url).path), "rb") as f:
            return f.read()
    if not url.startswith(("https://", "http://")):
        raise ValueError("expected a file:, https: or http: URL")
    with urllib.request.urlopen(url, timeout=FETCH_TIMEOUT_S) as resp:  # noqa: S310 - the operator's URL
        return resp.read()


class JwksValidator:
    """The token check of Kafka's broker validator (its ValidatorAccessTokenValidator)."""

    def __init__(self, source: JwksSource, *, audience=(), issuer=None, sub_claim="sub", scope_claim="scope",
                 clock_skew_s=30, clock_ms: Callable[[], int] | None = None):
        self.source = source
        self.audience = frozenset(audience)
        self.issuer = issuer
        self.sub_claim = sub_claim
        self.scope_claim = scope_claim
        self.skew_ms = clock_skew_s * 1000
        self.clock_ms = clock_ms or (lambda: int(time.time() * 1000))

    @classmethod
    def from_config(cls, config) -> "JwksValidator":
        url = config["sasl.oauthbearer.jwks.endpoint.url"]
        if not url:
            raise InvalidConfigurationError("sasl.oauthbearer.jwks.endpoint.url: OAuthBearerValidatorCallbackHandler "
                                            "needs the identity provider's key set (file: or https: URL)")
        source = JwksSource(url, config["sasl.oauthbearer.jwks.endpoint.refresh.ms"],
                            config["sasl.oauthbearer.jwks.endpoint.retry.backoff.ms"],
                            config["sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms"])
        return cls(source, audience=config["sasl.oauthbearer.expected.audience"],
                   issuer=config["sasl.oauthbearer.expected.issuer"], sub_claim=config["sasl.oauthbearer.sub.claim.name"],
                   scope_claim=config["sasl.oauthbearer.scope.claim.name"],
                   clock_skew_s=config["sasl.oauthbearer.clock.skew.seconds"])

    def __call__(self, token: str) -> ValidatedToken:
        parts = token.split(".")
        if len(parts) != 3 or not parts[2]:
            raise TokenValidationError("the token is not a signed JWS in compact form")
        try:
            header = json.loads(_b64url(parts[0]))
            claims = json.loads(_b64url(parts[1]))
            signature = _b64url(parts[2])
        except ValueError:
            raise TokenValidationError("the token's parts are not base64url-encoded JSON") from None
        if not isinstance(header, dict) or not isinstance(claims, dict):
            raise TokenValidationError("the token's header and payload must be JSON objects")
        alg = header.get("alg")
        if not isinstance(alg, str) or alg[:2] not in ("RS", "PS", "ES"):
            raise TokenValidationError(f"the token's algorithm {alg!r} is not accepted (RS*, PS*, ES*)")
        key = self.source.key(header.get("kid"))
        if key is None:
            raise TokenValidationError(f"no key {header.get('kid')!r} in the key set")
        if not key.verify(alg, f"{parts[0]}.{parts[1]}".encode("ascii"), signature):
            raise TokenValidationError("the token's signature does not verify")
        now = self.clock_ms()
        exp_ms = claim_time_ms(claims, "exp")
        if exp_ms is None:
            raise TokenValidationError("the token has no numeric exp claim")
        if now - self.skew_ms >= exp_ms:
            raise TokenValidationError("the token has expired")
        for name in ("iat", "nbf"):
            value_ms = claim_time_ms(claims, name)
            if value_ms is not None and value_ms > now + self.skew_ms:
                raise TokenValidationError(f"the token's {name} is not a time before now")
        if self.issuer is not None and claims.get("iss") != self.issuer:
            raise TokenValidationError("the token's issuer (iss) is not the expected one")
        if self.audience:
            aud = claims.get("aud")
            auds = {aud} if isinstance(aud, str) else {a for a in aud if isinstance(a, str)} if isinstance(aud, list) \
                else set()
            if not auds & self.audience:
                raise TokenValidationError("the token's audience (aud) is not an expected one")
        principal = claims.get(self.sub_claim)
        if not isinstance(principal, str) or not principal.strip():
            raise TokenValidationError(f"the token has no {self.sub_claim} claim naming the principal")
        scope_claim = claims.get(self.scope_claim, [])
        scope = frozenset(scope_claim.split() if isinstance(scope_claim, str) else
                          (s for s in scope_claim if isinstance(s, str)) if isinstance(scope_claim, list) else ())
        return ValidatedToken(principal, exp_ms, scope, claim_time_ms(claims, "iat"))

"""SASL/OAUTHBEARER (RFC 7628) as Kafka speaks it (KIP-255), with Kafka's default token
validator: unsecured JSON Web Tokens (``"alg":"none"``, an empty signature), for development.

The client sends one token: a GS2 header (``n,,`` or ``n,a=authzid,``), then ``\\x01``-separated
``key=value`` pairs holding ``auth=Bearer <token>`` and any SASL extensions, closed by
``\\x01\\x01``. A valid token completes the exchange with an empty answer; the principal is the
token's principal claim. An invalid one gets RFC 7628's error challenge
(``{"status":"invalid_token"}``); the client acknowledges it with a lone ``\\x01`` and the
exchange then fails with the reason.

The unsecured validator takes the options of Kafka's OAuthBearerUnsecuredValidatorCallbackHandler
(from the listener's OAuthBearerLoginModule): ``unsecuredValidatorPrincipalClaimName`` (default
``sub``), ``unsecuredValidatorScopeClaimName`` (``scope``), ``unsecuredValidatorRequiredScope``
(space-separated), ``unsecuredValidatorAllowableClockSkewMs`` (0)."""
from __future__ import annotations

import base64
import json
import math
import re
import time
from collections.abc import Callable, Mapping
from typing import NamedTuple

from ..errors import InvalidConfigurationError, SaslAuthenticationFailedError
from .sasl_server import SaslServer

MECHANISM = "OAUTHBEARER"
SEPARATOR = "\x01"
_KEY = re.compile(r"[A-Za-z]+")  # RFC 7628's key
_GS2 = re.compile(r"n,(?:a=([^,]*))?,")


class ValidatedToken(NamedTuple):
    principal: str
    lifetime_ms: int  # the token's exp, in ms since the epoch
    scope: frozenset
    start_ms: int | None  # its iat, when given


class TokenValidationError(Exception):
    """A token refused: the reason, safe to log (no token in it)."""


def _b64url_json(part: str, what: str):
    try:
        raw = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
        value = json.loads(raw)
    except ValueError:
        raise TokenValidationError(f"the token's {what} is not base64url-encoded JSON") from None
    if not isinstance(value, dict):
        raise TokenValidationError(f"the token's {what} is not a JSON object")
    return value


class UnsecuredJwsValidator:
    def __init__(self, options: Mapping[str, str] | None = None, clock_ms: Callable[[], int] | None = None):
        options = dict(options or {})
        self.principal_claim = options.get("unsecuredValidatorPrincipalClaimName", "sub").strip() or "sub"
        self.scope_claim = options.get("unsecuredValidatorScopeClaimName", "scope").strip() or "scope"
        self.required_scope = frozenset(options.get("unsecuredValidatorRequiredScope", "").split())
        skew = options.get("unsecuredValidatorAllowableClockSkewMs", "0")
        try:
            self.clock_skew_ms = int(skew)
            if self.clock_skew_ms < 0:
                raise ValueError
        except ValueError:
            raise InvalidConfigurationError(f"unsecuredValidatorAllowableClockSkewMs={skew!r}: "
                                            "expected a number of milliseconds >= 0") from None
        self.clock_ms = clock_ms or (lambda: int(time.time() * 1000))

    def __call__(self, token: str) -> ValidatedToken:
        parts = token.split(".")
        if len(parts) != 3:
            raise TokenValidationError("the token is not a JWS in compact form (three dot-separated parts)")
        header = _b64url_json(parts[0], "header")
        claims = _b64url_json(parts[1], "payload")
        if header.get("alg") != "none" or parts[2]:
            raise TokenValidationError("only unsecured tokens (alg none, no signature) are accepted by this validator")
        now = self.clock_ms()
        exp_ms = claim_time_ms(claims, "exp")
        if exp_ms is None:
            raise TokenValidationError("the token has no numeric exp claim")
        if now - self.clock_skew_ms >= exp_ms:
            raise TokenValidationError("the token has expired")
        iat_ms = claim_time_ms(claims, "iat")
        if iat_ms is not None and iat_ms > now + self.clock_skew_ms:
            raise TokenValidationError("the token was issued in the future (iat)")
        principal = claims.get(self.principal_claim)
        if not isinstance(principal, str) or not principal.strip():
            raise TokenValidationError(f"the token has no {self.principal_claim} claim naming the principal")
        scope_claim = claims.get(self.scope_claim, [])
        scope = frozenset(scope_claim.split() if isinstance(scope_claim, str) else
                          (s for s in scope_claim if isinstance(s, str)) if isinstance(scope_claim, list) else ())
        missing = self.required_scope - scope
        if missing:
            raise TokenValidationError(f"the token's scope lacks {' '.join(sorted(missing))}")
        return ValidatedToken(principal, exp_ms, scope, iat_ms)


# RFC 7519's NumericDate is seconds; beyond this (about 300,000 years) a number is no time a token
# could mean, and JSON's 1e999 or NaN would not convert to milliseconds at all
_MAX_NUMERIC_DATE_S = 1e13


def claim_time_ms(claims: Mapping, name: str) -> int | None:
    """A NumericDate claim (exp, iat, nbf) in milliseconds; None when the token has none.
    Anything but a finite number of seconds is a TokenValidationError."""
    value = claims.get(name)
    if value is None:
        return None
    if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
            or abs(value) > _MAX_NUMERIC_DATE_S):
        raise TokenValidationError(f"the token's {name} claim is not a time (a number of seconds)")
    return int(value * 1000)


def _fail(what):
    raise SaslAuthenticationFailedError(f"invalid OAUTHBEARER message: {what}")


class OAuthBearerServer(SaslServer):
    mechanism = MECHANISM

    def __init__(self, validate: Callable[[str], ValidatedToken]):
        super().__init__()
        self._validate = validate
        self._refusal = None  # why the token was refused, once the error challenge went out
        self.token: ValidatedToken | None = None
        self.extensions: dict = {}

    def _step(self, token: bytes) -> bytes:
        if self._refusal is not None:
            # the client's acknowledgement of the error challenge: the exchange fails now
            raise SaslAuthenticationFailedError(f"authentication failed: {self._refusal}")
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            _fail("not UTF-8")
        m = _GS2.match(text)
        if m is None:
            _fail("no GS2 header (n,, or n,a=authzid,)")
        rest = text[m.end():]
        if not rest.startswith(SEPARATOR) or not rest.endswith(SEPARATOR * 2):
            _fail("the key=value pairs must be enclosed in \\x01 ... \\x01\\x01")
        pairs = {}
        for item in rest[1:-2].split(SEPARATOR):
            key, eq, value = item.partition("=")
            if not eq or not _KEY.fullmatch(key):
                _fail("a pair is not key=value with an alphabetic key")
            pairs[key] = value
        auth = pairs.pop("auth", None)
        if auth is None or not auth.startswith("Bearer "):
            _fail("no auth=Bearer <token> pair")
        try:
            validated = self._validate(auth[len("Bearer "):].strip())
        except TokenValidationError as e:
            self._refusal = str(e)
            return json.dumps({"status": "invalid_token"}).encode()
        authzid = m.group(1)
        if authzid and authzid != validated.principal:
            raise SaslAuthenticationFailedError("authentication failed: the authorization id differs from the "
                                                "token's principal")
        self.token = validated
        self.extensions = pairs
        self._done(validated.principal)
        return b""


def client_token(token: str, authzid: str = "", extensions: Mapping[str, str] | None = None) -> bytes:
    """The one message an OAUTHBEARER client sends."""
    header = f"n,a={authzid}," if authzid else "n,,"
    pairs = [f"auth=Bearer {token}"] + [f"{k}={v}" for k, v in (extensions or {}).items()]
    return (header + SEPARATOR + SEPARATOR.join(pairs) + SEPARATOR * 2).encode()


def encode_unsecured_jwt(claims: Mapping) -> str:
    """An unsecured JWS in compact form: header {"alg":"none"}, the claims, an empty signature."""
    enc = lambda obj: base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()  # noqa: E731
    return f"{enc({'alg': 'none'})}.{enc(dict(claims))}."


def unsecured_token(principal: str, lifetime_s: float = 3600, scope=(), now_s: float | None = None,
                    principal_claim: str = "sub") -> str:
    """An unsecured JWT for ``principal``, valid ``lifetime_s`` from ``now_s``."""
    now_s = time.time() if now_s is None else now_s
    claims = {principal_claim: principal, "iat": int(now_s), "exp": int(now_s + lifetime_s)}
    if scope:
        claims["scope"] = " ".join(scope)
    return encode_unsecured_jwt(claims)


def unsecured_login_token(options: Mapping[str, str], now_s: float | None = None) -> str:
    """The token Kafka's unsecured login callback handler makes from an OAuthBearerLoginModule's
    options: ``unsecuredLoginStringClaim_<name>``, ``unsecuredLoginNumberClaim_<name>``,
    ``unsecuredLoginListClaim_<name>`` (its first character separates the items),
    ``unsecuredLoginPrincipalClaimName`` (default sub), ``unsecuredLoginLifetimeSeconds``
    (default 3600). InvalidConfigurationError naming the option when one is unusable."""
    now_s = time.time() if now_s is None else now_s
    claims = {}
    for key, value in options.items():
        kind, _, name = key.partition("_")
        if kind == "unsecuredLoginStringClaim":
            claims[name] = value
        elif kind == "unsecuredLoginNumberClaim":
            try:
                claims[name] = float(value) if "." in value else int(value)
            except ValueError:
                raise InvalidConfigurationError(f"{key}={value!r}: expected a number") from None
        elif kind == "unsecuredLoginListClaim":
            claims[name] = [item for item in value[1:].split(value[0]) if item] if value else []
    principal_claim = options.get("unsecuredLoginPrincipalClaimName", "sub")
    if not isinstance(claims.get(principal_claim), str) or not claims[principal_claim]:
        raise InvalidConfigurationError(f"OAUTHBEARER login: no unsecuredLoginStringClaim_{principal_claim} "
                                        "naming the principal")
    lifetime = options.get("unsecuredLoginLifetimeSeconds", "3600")
    try:
        lifetime_s = int(lifetime)
    except ValueError:
        raise InvalidConfigurationError(f"unsecuredLoginLifetimeSeconds={lifetime!r}: expected seconds") from None
    claims.setdefault("iat", int(now_s))
    claims.setdefault("exp", int(now_s + lifetime_s))
    return encode_unsecured_jwt(claims)

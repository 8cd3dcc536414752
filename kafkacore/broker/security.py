"""Who a connection is: Kafka's KafkaPrincipal, and the name a TLS client certificate gives it.

Kafka's DefaultKafkaPrincipalBuilder names a TLS client ``User:`` + its certificate's subject
distinguished name in RFC 2253 form, passed through ``ssl.principal.mapping.rules`` (KIP-371,
Kafka's SslPrincipalMapper); a plaintext client, or a TLS client without a certificate, is
``User:ANONYMOUS``. The rule syntax and semantics are Kafka's; the code is this project's own.
"""
from __future__ import annotations

import re
from typing import NamedTuple

from ..errors import InvalidConfigurationError

USER_TYPE = "User"  # KafkaPrincipal.USER_TYPE


class KafkaPrincipal(NamedTuple):
    principal_type: str
    name: str

    def __str__(self):
        return f"{self.principal_type}:{self.name}"


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")  # KafkaPrincipal.ANONYMOUS


class NoMatchingRule(Exception):
    """No ssl.principal.mapping.rules rule matched a certificate's name: Kafka fails the
    authentication, and so does this broker (the connection is closed)."""


# -- RFC 2253 names from what ssl.SSLSocket.getpeercert() returns -------------------------------

# the attribute keywords Java's X500Principal.getName(RFC2253) writes; others are written as
# their OID with the DER value in hex (RFC 2253 section 2.4)
_RFC2253_KEYWORDS = {
    "commonName": "CN", "countryName": "C", "localityName": "L", "stateOrProvinceName": "ST",
    "organizationName": "O", "organizationalUnitName": "OU", "streetAddress": "STREET",
    "domainComponent": "DC", "userId": "UID",
}
# attributes Python's ssl names but Java writes as OIDs: their OID and DER string tag
_OID_ATTRIBUTES = {"emailAddress": ("1.2.840.113549.1.9.1", 0x16)}  # an IA5String


def _escape_rfc2253(value: str) -> str:
    out = []
    for i, ch in enumerate(value):
        if ch in ',+"\\<>;' or (ch == "#" and i == 0) or (ch == " " and i in (0, len(value) - 1)):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def _der_hex(tag: int, value: str) -> str:
    raw = value.encode()
    if len(raw) < 0x80:
        length = bytes([len(raw)])
    else:
        n = len(raw).to_bytes((len(raw).bit_length() + 7) // 8, "big")
        length = bytes([0x80 | len(n)]) + n
    return "#" + (bytes([tag]) + length + raw).hex()


def rfc2253_name(subject) -> str:
    """The subject of ``getpeercert()`` (RDNs in certificate order, each a tuple of (attribute,
    value) pairs) as RFC 2253 text: the RDNs in reverse order, ``CN=client,OU=test,O=kafkacore``."""
    rdns = []
    for rdn in reversed(subject):
        parts = []
        for attr, value in rdn:
            if attr in _RFC2253_KEYWORDS:
                parts.append(f"{_RFC2253_KEYWORDS[attr]}={_escape_rfc2253(value)}")
            elif attr in _OID_ATTRIBUTES:
                oid, tag = _OID_ATTRIBUTES[attr]
                parts.append(f"{oid}={_der_hex(tag, value)}")
            else:
                parts.append(f"{attr}={_escape_rfc2253(value)}")
        rdns.append("+".join(parts))
    return ",".join(rdns)


# -- ssl.principal.mapping.rules (KIP-371) --------------------------------------------------------

class _Rule(NamedTuple):
    pattern: re.Pattern | None  # None: DEFAULT
    replacement: str
    case: str  # "", "L" or "U"
    text: str


def _java_replacement(text: str) -> str:
    """Java's Matcher.replaceAll replacement syntax (``$1`` a group, ``\\x`` a literal x) in
    Python's re.sub syntax."""
    out = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            out.append(text[i + 1].replace("\\", "\\\\"))
            i += 2
        elif ch == "$" and i + 1 < len(text) and text[i + 1].isdigit():
            j = i + 1
            while j < len(text) and text[j].isdigit():
                j += 1
            out.append(f"\\g<{text[i + 1:j]}>")
            i = j
        else:
            out.append("\\\\" if ch == "\\" else ch)
            i += 1
    return "".join(out)


def _read_until_slash(text: str, i: int, key: str, whole: str) -> tuple[str, int]:
    """The rule text from ``i`` up to an unescaped ``/`` (escapes kept), and the index after it."""
    start = i
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == "/":
            return text[start:i], i + 1
        i += 1
    raise InvalidConfigurationError(f"{key}={whole!r}: a rule ends before its closing '/': "
                                    "expected RULE:pattern/replacement/[LU]")


def parse_mapping_rules(value, key="ssl.principal.mapping.rules") -> tuple[_Rule, ...]:
    """Kafka's rule list: ``DEFAULT`` or ``RULE:pattern/replacement/`` with an optional ``L``
    (lower case) or ``U`` (upper case), separated by commas or new lines. A comma inside a
    pattern belongs to it (the pattern runs to its unescaped ``/``)."""
    text = str(value)
    rules = []
    i = 0
    while i < len(text):
        while i < len(text) and text[i] in " \t\r\n,":
            i += 1
        if i >= len(text):
            break
        if text.startswith("DEFAULT", i):
            rules.append(_Rule(None, "", "", "DEFAULT"))
            i += len("DEFAULT")
        elif text.startswith("RULE:", i):
            begin = i
            pattern, i = _read_until_slash(text, i + len("RULE:"), key, text)
            replacement, i = _read_until_slash(text, i, key, text)
            case = ""
            if i < len(text) and text[i] in "LU":
                case = text[i]
                i += 1
            try:
                compiled = re.compile(pattern)
            except re.error as e:
                raise InvalidConfigurationError(f"{key}={text!r}: invalid pattern {pattern!r}: {e}") from None
            rules.append(_Rule(compiled, _java_replacement(replacement), case, text[begin:i]))
        else:
            end = min((j for j in (text.find(",", i), text.find("\n", i)) if j >= 0), default=len(text))
            raise InvalidConfigurationError(f"{key}={text!r}: invalid rule {text[i:end].strip()!r}: "
                                            "expected DEFAULT or RULE:pattern/replacement/[LU]")
        while i < len(text) and text[i] in " \t\r":
            i += 1
        if i < len(text) and text[i] not in ",\n":
            raise InvalidConfigurationError(f"{key}={text!r}: unexpected {text[i:].split(',')[0]!r} after a rule")
    return tuple(rules) or (_Rule(None, "", "", "DEFAULT"),)


class SslPrincipalMapper:
    """The first rule whose pattern matches the whole name rewrites it (every match replaced,
    as Java's replaceAll); DEFAULT keeps the name; no match raises NoMatchingRule."""

    def __init__(self, rules_text="DEFAULT", key="ssl.principal.mapping.rules"):
        self.rules = parse_mapping_rules(rules_text, key)

    def name(self, distinguished_name: str) -> str:
        for rule in self.rules:
            if rule.pattern is None:
                return distinguished_name
            if rule.pattern.fullmatch(distinguished_name):
                result = rule.pattern.sub(rule.replacement, distinguished_name)
                if rule.case == "L":
                    result = result.lower()
                elif rule.case == "U":
                    result = result.upper()
                return result
        raise NoMatchingRule(f"no ssl.principal.mapping.rules rule applies to {distinguished_name!r}")

    def principal(self, peer_certificate: dict | None) -> KafkaPrincipal:
        """The principal of a TLS client: ANONYMOUS without a certificate."""
        if not peer_certificate or not peer_certificate.get("subject"):
            return ANONYMOUS
        return KafkaPrincipal(USER_TYPE, self.name(rfc2253_name(peer_certificate["subject"])))

"""Kafka's ``sasl.jaas.config`` values: JAAS login-module entries as Kafka's JaasConfig reads
them, e.g.

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_alice="alice-secret";

Each entry is a login-module class, a control flag (required, requisite, sufficient or
optional), options as ``key=value`` (a value is a bare word or a double-quoted string with
backslash escapes) and a closing ``;``. Comments (``//`` to the end of the line, ``/* */``) are
skipped. Option values are secrets: errors name the key, never the value."""
from __future__ import annotations

import re
from typing import NamedTuple

from ..errors import InvalidConfigurationError

CONTROL_FLAGS = ("required", "requisite", "sufficient", "optional")

_TOKEN = re.compile(r"""
    (?P<space>\s+|//[^\n]*|/\*.*?\*/)
  | (?P<quoted>"(?:[^"\\]|\\.)*")
  | (?P<punct>[=;])
  | (?P<word>[^\s=;"]+)
""", re.VERBOSE | re.DOTALL)
_ESCAPE = re.compile(r"\\(.)", re.DOTALL)
_ESCAPED = {"n": "\n", "t": "\t", "r": "\r"}


class LoginModule(NamedTuple):
    name: str
    control_flag: str
    options: dict


def _tokens(text, key):
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:  # an unterminated quote or comment
            raise InvalidConfigurationError(f"{key}: unterminated string or comment at character {pos}")
        pos = m.end()
        if m.lastgroup == "space":
            continue
        value = m.group(m.lastgroup)
        if m.lastgroup == "quoted":
            yield "value", _ESCAPE.sub(lambda e: _ESCAPED.get(e.group(1), e.group(1)), value[1:-1])
        elif m.lastgroup == "punct":
            yield value, value
        else:
            yield "value", value


def parse_jaas_config(text: str, key: str = "sasl.jaas.config") -> list[LoginModule]:
    """Every login-module entry in ``text``; InvalidConfigurationError naming ``key`` (and never
    an option's value) when it does not parse."""
    tokens = list(_tokens(str(text), key))
    modules, i = [], 0

    def take(what):
        nonlocal i
        if i >= len(tokens):
            raise InvalidConfigurationError(f"{key}: expected {what} at the end of the value")
        kind, value = tokens[i]
        i += 1
        return kind, value

    while i < len(tokens):
        kind, name = take("a login module class")
        if kind != "value":
            raise InvalidConfigurationError(f"{key}: expected a login module class, found {name!r}")
        kind, flag = take("a control flag")
        if kind != "value" or flag.lower() not in CONTROL_FLAGS:
            raise InvalidConfigurationError(f"{key}: login module {name}: the control flag must be one of "
                                            f"{', '.join(CONTROL_FLAGS)}")
        options = {}
        while True:
            kind, word = take("';' closing the login module entry")
            if kind == ";":
                break
            if kind != "value":
                raise InvalidConfigurationError(f"{key}: login module {name}: expected an option name")
            kind, _eq = take(f"'=' after option {word}")
            if kind != "=":
                raise InvalidConfigurationError(f"{key}: login module {name}: option {word} has no '=value'")
            kind, value = take(f"the value of option {word}")
            if kind != "value":
                raise InvalidConfigurationError(f"{key}: login module {name}: option {word} has no value")
            options[word] = value
        modules.append(LoginModule(name, flag.lower(), options))
    if not modules:
        raise InvalidConfigurationError(f"{key}: no login module")
    return modules


def single_login_module(text: str, key: str = "sasl.jaas.config") -> LoginModule:
    """The one entry a ``sasl.jaas.config`` must hold (Kafka refuses more than one)."""
    modules = parse_jaas_config(text, key)
    if len(modules) != 1:
        raise InvalidConfigurationError(f"{key}: must contain exactly one login module entry, found {len(modules)}")
    return modules[0]

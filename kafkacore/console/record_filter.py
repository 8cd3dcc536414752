"""Which records the message browser keeps when it searches: a substring of the key, the value
or the headers, and/or a test of one field of a JSON value by a path.

Substrings are matched without regard to case against the bytes read as UTF-8 (bytes that are
not UTF-8 count as U+FFFD), and, for a value the browser decoded (JSON, framed JSON, Avro),
against the strings in the document too (so ``say "hi"`` finds ``{"note": "say \\"hi\\""}``).
A header matches by its key or its value.

A path test is ``PATH [OP LITERAL]``, a small subset of JSONPath (no wildcards, no filters):
  PATH     ``$`` then ``.name``, ``["any name"]`` or ``[index]`` steps; the ``$`` may be left out
  OP       ``==`` ``!=`` ``<`` ``<=`` ``>`` ``>=``, or ``~`` (the field's text holds LITERAL)
  LITERAL  a JSON literal (``42``, ``"text"``, ``true``, ``null``) or a bare word (a string)
Without OP the path need only exist. A value that is not JSON, or lacks the path, never
matches; ``<`` and the like compare numbers with numbers and strings with strings only.
Examples: ``$.user.id == 42``, ``$.items[0].sku == sku-7``, ``status != "failed"``.
"""
from __future__ import annotations

import json
import operator
import re

WHERE = ("any", "key", "value", "headers")
_OPS = {"==": operator.eq, "!=": operator.ne, "<=": operator.le, ">=": operator.ge, "<": operator.lt,
        ">": operator.gt, "~": None}
_STEP = re.compile(r"""\.([A-Za-z_$@-][\w$@-]*)|\[\s*(-?\d+)\s*\]|\[\s*("(?:[^"\\]|\\.)*"|'[^']*')\s*\]""")
_OP = re.compile(r"\s*(==|!=|<=|>=|<|>|~)\s*")
_MISSING = object()


class FilterError(ValueError):
    """A search the browser cannot run as written; the message says what is wrong."""


class PathTest:
    """One ``PATH [OP LITERAL]`` test, parsed once and applied to many values."""

    def __init__(self, text: str):
        self.text = text.strip()
        rest = self.text
        if not rest:
            raise FilterError("the JSON path is empty")
        if rest.startswith("$"):
            rest = rest[1:]
        elif not rest.startswith(("[", ".")):
            rest = "." + rest  # "user.id == 1" reads as "$.user.id == 1"
        self.steps = []
        while rest and rest[0] in ".[":
            m = _STEP.match(rest)
            if not m:
                raise FilterError(f"cannot read the JSON path at {rest[:20]!r}: "
                                  "use $.name, $[\"a name\"] or $[0] steps")
            name, index, quoted = m.groups()
            if index is not None:
                self.steps.append(int(index))
            elif quoted is not None:
                self.steps.append(json.loads(quoted) if quoted[0] == '"' else quoted[1:-1])
            else:
                self.steps.append(name)
            rest = rest[m.end():]
        self.op = self.literal = None
        if rest.strip():
            m = _OP.match(rest)
            if not m:
                raise FilterError(f"expected ==, !=, <, <=, >, >= or ~ after the path, not {rest.strip()[:20]!r}")
            self.op = m.group(1)
            word = rest[m.end():].strip()
            if not word:
                raise FilterError(f"nothing to compare with after {self.op!r}")
            try:
                self.literal = json.loads(word)
            except ValueError:
                self.literal = word  # a bare word: a string
        if not self.steps and self.op is None:
            raise FilterError("the JSON path names no field (write e.g. $.user.id == 42)")

    def matches(self, doc) -> bool:
        value = doc
        for step in self.steps:
            if isinstance(step, int) and isinstance(value, list) and -len(value) <= step < len(value):
                value = value[step]
            elif isinstance(step, str) and isinstance(value, dict) and step in value:
                value = value[step]
            else:
                return False
        if self.op is None:
            return True
        if self.op == "~":
            text = value if isinstance(value, str) else json.dumps(value)
            wanted = self.literal if isinstance(self.literal, str) else json.dumps(self.literal)
            return wanted.casefold() in text.casefold()
        if self.op in ("==", "!="):
            same = _same(value, self.literal)
            return same if self.op == "==" else not same
        numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (value, self.literal))
        strings = isinstance(value, str) and isinstance(self.literal, str)
        return (numbers or strings) and _OPS[self.op](value, self.literal)


def _same(a, b) -> bool:
    """JSON equality: 1 == 1.0, but true is not 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return a == b


class RecordFilter:
    """``text`` (a substring, looked for ``where``) and/or ``path`` (a PathTest on the value)."""

    def __init__(self, text: str | None = None, where: str | None = None, path: str | None = None):
        where = where or "any"
        if where not in WHERE:
            raise FilterError(f"search in must be one of {', '.join(WHERE)}, not {where!r}")
        self.text = text.casefold() if text else None
        self.where = where
        self.path = PathTest(path) if path and path.strip() else None

    @property
    def active(self) -> bool:
        return self.text is not None or self.path is not None

    def matches(self, rec, value_document) -> bool:
        """``rec`` a consumer record; ``value_document()`` its value as a decoded JSON document
        (or MISSING): what a path test looks at, and whose strings a substring is looked for
        in. It is called only when needed (at most twice: it should be cheap or remember)."""
        if self.path is not None:
            doc = value_document()
            if doc is _MISSING or not self.path.matches(doc):
                return False
        if self.text is None:
            return True
        w = self.where
        if w in ("any", "key") and self._has(rec.key):
            return True
        if w in ("any", "value"):
            if self._has(rec.value):
                return True
            doc = value_document()
            if isinstance(doc, (dict, list)) and self._in_document(doc):
                return True
        if w in ("any", "headers"):
            return any(self.text in k.casefold() or self._has(v) for k, v in (rec.headers or ()))
        return False

    def _in_document(self, doc) -> bool:
        """Whether a string or a name in a JSON document holds the text, escapes undone (the
        bytes hold \\" where the value holds a quote)."""
        if isinstance(doc, str):
            return self.text in doc.casefold()
        if isinstance(doc, dict):
            return any(self._in_document(k) or self._in_document(v) for k, v in doc.items())
        if isinstance(doc, list):
            return any(self._in_document(v) for v in doc)
        return False

    def _has(self, data) -> bool:
        return data is not None and self.text in bytes(data).decode("utf-8", errors="replace").casefold()


MISSING = _MISSING

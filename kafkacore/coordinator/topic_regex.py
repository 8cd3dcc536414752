"""KIP-848's regex subscriptions (``SubscribedTopicRegex``): a member subscribes to every topic
whose whole name matches, internal topics excepted, re-resolved as topics come and go.

Kafka compiles the expression with RE2/J (linear time: no backreferences, no lookaround, no
atomic groups or possessive quantifiers); Python's ``re`` is a superset of that syntax for
everything else a topic pattern uses, so the constructs RE2/J refuses are refused here too,
with Kafka's INVALID_REGULAR_EXPRESSION, and the rest compiled by ``re``. librdkafka sends its
``^``-prefixed subscriptions joined as ``(^a.*)|(^b.*)``, and the empty string for none.
"""
from __future__ import annotations

import functools
import re

from ..errors import InvalidRegularExpressionError

# what RE2 does not have: lookahead/lookbehind, atomic groups, backreferences, possessive quantifiers
_NOT_RE2 = re.compile(r"\(\?[=!>]|\(\?<[=!]|\\[1-9]|\\k<|\(\?P=|[*+?}]\+")


@functools.lru_cache(maxsize=256)
def compile_regex(text):
    """The compiled pattern; InvalidRegularExpressionError when RE2/J would not take it."""
    bad = _NOT_RE2.search(text)
    if bad is not None:
        raise InvalidRegularExpressionError(f"SubscribedTopicRegex `{text}` is not a valid regular expression: "
                                            f"{bad.group(0)!r} is not supported (RE2/J syntax).")
    try:
        return re.compile(text)
    except re.error as e:
        raise InvalidRegularExpressionError(f"SubscribedTopicRegex `{text}` is not a valid regular expression: "
                                            f"{e}.") from None


def matching_topics(text, topics):
    """The names in ``topics`` ({name: TopicInfo}) the whole of which ``text`` matches, internal
    topics left out."""
    pattern = compile_regex(text)
    return {name for name, info in topics.items() if not info.internal and pattern.fullmatch(name)}

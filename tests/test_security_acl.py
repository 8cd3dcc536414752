"""Kafka's ACL semantics in kafkacore's Authorizer and filters (security/acl.py): a table of
decisions, the authorized operations, the validation of new bindings, filter matching, and the
znode codecs of the ACL store."""
import pytest
from hypothesis import given, strategies as st

from kafkacore.cluster.acl_store import decode_change, decode_entries, encode_change, encode_entries, resource_path
from kafkacore.errors import InvalidRequestError
from kafkacore.security.acl import (AccessControlEntry as Ace, AccessControlEntryFilter, AclBinding, AclBindingFilter,
                                    AclOperation as Op, AclPermissionType as Perm, Authorizer, PatternType,
                                    ResourcePattern, ResourcePatternFilter, ResourceType as RT, parse_super_users,
                                    to_bit_field, validate_filter, validate_new_binding)

ALLOW, DENY = Perm.ALLOW, Perm.DENY
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED


def _authorizer(acls, **kw):
    a = Authorizer(**kw)
    by = {}
    for (rt, name, pt), ace in acls:
        by.setdefault(ResourcePattern(rt, name, pt), set()).add(ace)
    for pattern, entries in by.items():
        a.set_acls(pattern, entries)
    return a


TOPIC_T = (RT.TOPIC, "orders", LIT)
CASES = [
    # (acls, principal, host, op, type, name, expected)
    ([(TOPIC_T, Ace("User:alice", "*", Op.READ, ALLOW))], "User:alice", "10.0.0.1", Op.READ, RT.TOPIC, "orders", True),
    ([(TOPIC_T, Ace("User:alice", "*", Op.READ, ALLOW))], "User:bob", "10.0.0.1", Op.READ, RT.TOPIC, "orders", False),
    ([(TOPIC_T, Ace("User:alice", "*", Op.READ, ALLOW))], "User:alice", "h", Op.WRITE, RT.TOPIC, "orders", False),
    ([(TOPIC_T, Ace("User:alice", "*", Op.READ, ALLOW))], "User:alice", "h", Op.READ, RT.GROUP, "orders", False),
    # deny beats allow, also an ALL deny and a wildcard-principal deny
    ([(TOPIC_T, Ace("User:alice", "*", Op.READ, ALLOW)), (TOPIC_T, Ace("User:alice", "*", Op.READ, DENY))],
     "User:alice", "h", Op.READ, RT.TOPIC, "orders", False),
    ([(TOPIC_T, Ace("User:alice", "*", Op.ALL, ALLOW)), (TOPIC_T, Ace("User:*", "*", Op.ALL, DENY))],
     "User:alice", "h", Op.WRITE, RT.TOPIC, "orders", False),
    # a DENY of READ does not deny DESCRIBE (implication is for ALLOW only)
    ([(TOPIC_T, Ace("User:alice", "*", Op.DESCRIBE, ALLOW)), (TOPIC_T, Ace("User:alice", "*", Op.READ, DENY))],
     "User:alice", "h", Op.DESCRIBE, RT.TOPIC, "orders", True),
    # wildcards: principal, host, resource
    ([(TOPIC_T, Ace("User:*", "*", Op.READ, ALLOW))], "User:anyone", "h", Op.READ, RT.TOPIC, "orders", True),
    ([((RT.TOPIC, "*", LIT), Ace("User:alice", "*", Op.READ, ALLOW))], "User:alice", "h", Op.READ, RT.TOPIC, "x", True),
    ([(TOPIC_T, Ace("User:alice", "10.0.0.1", Op.READ, ALLOW))], "User:alice", "10.0.0.1", Op.READ, RT.TOPIC,
     "orders", True),
    ([(TOPIC_T, Ace("User:alice", "10.0.0.1", Op.READ, ALLOW))], "User:alice", "10.0.0.2", Op.READ, RT.TOPIC,
     "orders", False),
    # prefixed: names starting with the prefix; a literal "*" prefix is just a prefix
    ([((RT.TOPIC, "ord", PRE), Ace("User:alice", "*", Op.WRITE, ALLOW))], "User:alice", "h", Op.WRITE, RT.TOPIC,
     "orders", True),
    ([((RT.TOPIC, "ord", PRE), Ace("User:alice", "*", Op.WRITE, ALLOW))], "User:alice", "h", Op.WRITE, RT.TOPIC,
     "or", False),
    ([((RT.TOPIC, "ord", PRE), Ace("User:alice", "*", Op.WRITE, DENY)), (TOPIC_T, Ace("User:alice", "*", Op.ALL, ALLOW))],
     "User:alice", "h", Op.WRITE, RT.TOPIC, "orders", False),
    # implied operations
    ([(TOPIC_T, Ace("User:alice", "*", Op.WRITE, ALLOW))], "User:alice", "h", Op.DESCRIBE, RT.TOPIC, "orders", True),
    ([(TOPIC_T, Ace("User:alice", "*", Op.ALTER, ALLOW))], "User:alice", "h", Op.DESCRIBE, RT.TOPIC, "orders", True),
    ([(TOPIC_T, Ace("User:alice", "*", Op.ALTER_CONFIGS, ALLOW))], "User:alice", "h", Op.DESCRIBE_CONFIGS, RT.TOPIC,
     "orders", True),
    ([(TOPIC_T, Ace("User:alice", "*", Op.DESCRIBE, ALLOW))], "User:alice", "h", Op.READ, RT.TOPIC, "orders", False),
    ([(TOPIC_T, Ace("User:alice", "*", Op.ALL, ALLOW))], "User:alice", "h", Op.DELETE, RT.TOPIC, "orders", True),
    # no ACL on the resource: allow.everyone.if.no.acl.found's default (false)
    ([], "User:alice", "h", Op.READ, RT.TOPIC, "orders", False),
]


@pytest.mark.parametrize("acls,principal,host,op,rtype,name,expected", CASES)
def test_decisions_follow_kafkas_rules(acls, principal, host, op, rtype, name, expected):
    a = _authorizer(acls)
    assert a.authorize(principal, host, op, rtype, name) is expected
    assert a.authorize(principal, host, op, rtype, name) is expected  # the cached answer is the same


def test_super_users_and_allow_everyone_if_no_acl_found():
    assert parse_super_users(" User:admin ; User:ops;") == {"User:admin", "User:ops"}
    a = _authorizer([(TOPIC_T, Ace("User:*", "*", Op.ALL, DENY))], super_users={"User:admin"},
                    allow_everyone_if_no_acl_found=True)
    assert a.authorize("User:admin", "h", Op.WRITE, RT.TOPIC, "orders")  # super users pass a DENY
    assert not a.authorize("User:bob", "h", Op.WRITE, RT.TOPIC, "orders")  # an ACL on it: no fallback
    assert a.authorize("User:bob", "h", Op.WRITE, RT.TOPIC, "other")  # none on it: everyone
    # an ACL for somebody else on the resource is enough to switch the fallback off
    a.set_acls(ResourcePattern(RT.TOPIC, "other", LIT), {Ace("User:carol", "*", Op.READ, ALLOW)})
    assert not a.authorize("User:bob", "h", Op.WRITE, RT.TOPIC, "other")


def test_a_change_invalidates_cached_decisions():
    a = _authorizer([])
    assert not a.authorize("User:alice", "h", Op.READ, RT.TOPIC, "orders")
    a.set_acls(ResourcePattern(*TOPIC_T), {Ace("User:alice", "*", Op.READ, ALLOW)})
    assert a.authorize("User:alice", "h", Op.READ, RT.TOPIC, "orders")
    a.set_acls(ResourcePattern(*TOPIC_T), set())
    assert not a.authorize("User:alice", "h", Op.READ, RT.TOPIC, "orders")


def test_authorized_operations_are_the_supported_ones_allowed():
    a = _authorizer([((RT.CLUSTER, "kafka-cluster", LIT), Ace("User:alice", "*", Op.ALTER, ALLOW))],
                    super_users={"User:admin"})
    assert a.authorized_operations("User:alice", "h", RT.CLUSTER, "kafka-cluster") == {Op.ALTER, Op.DESCRIBE}
    cluster_ops = a.authorized_operations("User:admin", "h", RT.CLUSTER, "kafka-cluster")
    assert len(cluster_ops) == 7 and Op.ALL not in cluster_ops  # what DescribeCluster lists
    assert to_bit_field({Op.ALTER, Op.DESCRIBE}) == (1 << 7) | (1 << 8)


@pytest.mark.parametrize("binding,message", [
    (AclBinding(ResourcePattern(RT.CLUSTER, "c", LIT), Ace("User:a", "*", Op.ALTER, ALLOW)),
     "The only valid name for the CLUSTER resource is kafka-cluster"),
    (AclBinding(ResourcePattern(RT.TOPIC, "", LIT), Ace("User:a", "*", Op.READ, ALLOW)), "Invalid empty resource name"),
    (AclBinding(ResourcePattern(RT.ANY, "t", LIT), Ace("User:a", "*", Op.READ, ALLOW)), "Invalid resourceType ANY"),
    (AclBinding(ResourcePattern(RT.TOPIC, "t", PatternType.MATCH), Ace("User:a", "*", Op.READ, ALLOW)),
     "Invalid patternType MATCH"),
    (AclBinding(ResourcePattern(RT.TOPIC, "t", LIT), Ace("User:a", "*", Op.ANY, ALLOW)), "Invalid operation ANY"),
    (AclBinding(ResourcePattern(RT.TOPIC, "t", LIT), Ace("User:a", "*", Op.READ, Perm.ANY)),
     "Invalid permissionType ANY"),
    (AclBinding(ResourcePattern(RT.TOPIC, "t", LIT), Ace("alice", "*", Op.READ, ALLOW)),
     "Could not parse principal from `alice`"),
])
def test_invalid_bindings_are_refused_with_kafkas_messages(binding, message):
    with pytest.raises(InvalidRequestError, match=message.replace("`", ".")):
        validate_new_binding(binding)


def _f(rt=RT.ANY, name=None, pt=PatternType.ANY, principal=None, host=None, op=Op.ANY, perm=Perm.ANY):
    return AclBindingFilter(ResourcePatternFilter(rt, name, pt), AccessControlEntryFilter(principal, host, op, perm))


def test_filter_matching():
    lit = AclBinding(ResourcePattern(RT.TOPIC, "orders", LIT), Ace("User:alice", "*", Op.READ, ALLOW))
    star = AclBinding(ResourcePattern(RT.TOPIC, "*", LIT), Ace("User:bob", "h1", Op.WRITE, DENY))
    pre = AclBinding(ResourcePattern(RT.TOPIC, "ord", PRE), Ace("User:alice", "*", Op.READ, ALLOW))
    every = [lit, star, pre]
    assert [b for b in every if _f().matches(b)] == every
    assert [b for b in every if _f(name="orders").matches(b)] == [lit]  # ANY pattern type: the name exactly
    assert [b for b in every if _f(name="orders", pt=PatternType.MATCH).matches(b)] == every
    assert [b for b in every if _f(name="x", pt=PatternType.MATCH).matches(b)] == [star]
    assert [b for b in every if _f(pt=PRE).matches(b)] == [pre]
    assert [b for b in every if _f(principal="User:alice").matches(b)] == [lit, pre]
    assert [b for b in every if _f(host="h1", perm=DENY).matches(b)] == [star]
    assert [b for b in every if _f(rt=RT.GROUP).matches(b)] == []
    a = _authorizer([((b.pattern.resource_type, b.pattern.name, b.pattern.pattern_type), b.entry) for b in every])
    assert a.acls(_f(name="orders", pt=PatternType.MATCH)) == sorted(every)
    with pytest.raises(InvalidRequestError, match="Unknown patternFilter"):
        validate_filter(_f(pt=PatternType.UNKNOWN))
    with pytest.raises(InvalidRequestError, match="Unknown entryFilter"):
        validate_filter(_f(op=Op.UNKNOWN))


_names = st.text(alphabet="ab*-", min_size=1, max_size=6)


@given(_names, _names, st.sampled_from([LIT, PRE]))
def test_match_filter_agrees_with_the_authorizer(resource, pattern_name, pattern_type):
    """A MATCH filter for a resource finds exactly the patterns the authorizer applies to it."""
    a = Authorizer()
    pattern = ResourcePattern(RT.TOPIC, pattern_name, pattern_type)
    ace = Ace("User:u", "*", Op.READ, ALLOW)
    a.set_acls(pattern, {ace})
    applies = a.authorize("User:u", "h", Op.READ, RT.TOPIC, resource)
    assert _f(rt=RT.TOPIC, name=resource, pt=PatternType.MATCH).matches(AclBinding(pattern, ace)) is applies


def test_store_codecs_are_kafkas():
    pattern = ResourcePattern(RT.TRANSACTIONAL_ID, "tx-", PRE)
    assert resource_path(pattern) == "/kafka-acl-extended/prefixed/TransactionalId/tx-"
    assert resource_path(ResourcePattern(RT.TOPIC, "t", LIT)) == "/kafka-acl/Topic/t"
    data = encode_entries({Ace("User:alice", "*", Op.CLUSTER_ACTION, DENY)})
    assert data == (b'{"version":1,"acls":[{"principal":"User:alice","permissionType":"Deny",'
                    b'"operation":"ClusterAction","host":"*"}]}')
    assert decode_entries(data, "x") == {Ace("User:alice", "*", Op.CLUSTER_ACTION, DENY)}
    assert encode_change(ResourcePattern(RT.TOPIC, "a:b", LIT)) == ("/kafka-acl-changes/acl_changes_", b"TOPIC:a:b")
    assert decode_change("/kafka-acl-changes", b"TOPIC:a:b") == ResourcePattern(RT.TOPIC, "a:b", LIT)
    path, data = encode_change(pattern)
    assert path == "/kafka-acl-extended-changes/acl_changes_"
    assert data == b'{"version":1,"resourceType":"TRANSACTIONAL_ID","name":"tx-","patternType":"PREFIXED"}'
    assert decode_change("/kafka-acl-extended-changes", data) == pattern

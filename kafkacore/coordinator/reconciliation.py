"""A consumer-group member's way from what it owns to its target assignment (Kafka's
CurrentAssignmentBuilder): revocation comes before assignment, so a partition never has two
owners.

- STABLE at an older epoch: compute the next step towards the target.
- UNREVOKED_PARTITIONS: the member keeps its epoch until its heartbeat's owned partitions no
  longer list any partition pending revocation (an omitted list counts as still owning them);
  then it moves to epoch + 1 and on towards the target.
- UNRELEASED_PARTITIONS: partitions of its target are still owned by other members; each
  heartbeat hands over those that were released since.

The next step keeps (assigned ∩ target), asks for the revocation of (assigned - target) while
the member still owns any of them, and otherwise assigns (target - assigned) except what another
member still owns, moving the member to the target epoch.
"""
from __future__ import annotations

from ..errors import FencedMemberEpochError
from .consumer_group import MEMBER_STABLE, UNRELEASED_PARTITIONS, UNREVOKED_PARTITIONS


def _owns_any(owned, partitions):
    """``owned``: the heartbeat's [(topic id, [partitions])] or None (not sent: assume it does)."""
    if owned is None:
        return True
    for tid, parts in owned:
        pending = partitions.get(tid)
        if pending and any(p in pending for p in parts):
            return True
    return False


def reconcile(member, target_epoch, target, owned, owned_by_other):
    """Returns the member after this step (a copy, or ``member`` itself when nothing changes).
    ``target``: the member's target assignment; ``owned``: what its heartbeat says it owns;
    ``owned_by_other(topic id, partition)``: another member still holds that partition."""
    if member.state == MEMBER_STABLE:
        if member.member_epoch == target_epoch:
            return member
        return _next(member, member.member_epoch, target_epoch, target, owned, owned_by_other)
    if member.state == UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.pending_revocation):
            return member
        return _next(member, member.member_epoch + 1, target_epoch, target, owned, owned_by_other)
    if member.state == UNRELEASED_PARTITIONS:
        return _next(member, member.member_epoch, target_epoch, target, owned, owned_by_other)
    # a state this coordinator does not know (written by a newer one): start the member over
    if owned is None or owned:
        raise FencedMemberEpochError("the member is in an unknown state: it must give up its partitions and rejoin")
    return _next(member, target_epoch, target_epoch, target, owned, owned_by_other)


def _next(member, epoch, target_epoch, target, owned, owned_by_other):
    assigned, revoking, to_assign = {}, {}, {}
    unreleased = False
    for tid in set(target) | set(member.assigned):
        want = target.get(tid, set())
        have = member.assigned.get(tid, set())
        keep = have & want
        if keep:
            assigned[tid] = set(keep)
        if have - keep:
            revoking[tid] = have - keep
        new = {p for p in want - keep if not owned_by_other(tid, p)}
        if len(new) < len(want - keep):
            unreleased = True
        if new:
            to_assign[tid] = new
    out = member.copy()
    if revoking and _owns_any(owned, revoking):
        out.state = UNREVOKED_PARTITIONS
        out.assigned, out.pending_revocation = assigned, revoking
        out.update_epoch(epoch)
    else:
        for tid, parts in to_assign.items():
            assigned.setdefault(tid, set()).update(parts)
        out.state = UNRELEASED_PARTITIONS if unreleased else MEMBER_STABLE
        out.assigned, out.pending_revocation = assigned, {}
        out.update_epoch(target_epoch)
    if out.same_assignment(member):
        return member
    return out

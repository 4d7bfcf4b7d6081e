"""When a consumer group resolves its members' regular expressions again, and what they
resolved to in between (``group.consumer.regex.refresh.interval.ms``).

Kafka 4 (GroupMetadataManager.maybeUpdateRegularExpressions) resolves a group's regular
expressions at a heartbeat when one of them is not resolved yet, when topics were created
since the last resolution, or when that resolution is older than the refresh interval (10
minutes by default; at least 10 s); never twice within 10 s. In between, the group keeps
what they resolved to: a deleted topic leaves the assignment because it is looked up by name
(the subscription metadata), and a change of the member's rights (ACLs) is seen at the next
refresh only.

Here, the same, except sooner where Kafka batches: a member whose regular expression the
group has not resolved (it joined, or sent another one) is resolved at its own heartbeat,
and a topic or view created since the last resolution makes the next heartbeat of any member
resolve the whole group again (Kafka waits until 10 s after the previous resolution). Only
the refresh interval brings in what nothing announces: rights granted or revoked.

Invariant: ``group.regex_matches`` holds one entry per member with a regular expression,
for the regular expression in ``group.resolved_regexes`` under the same member id.
"""

from __future__ import annotations

from typing import Protocol

from .consumer_group import ConsumerMember, ConsumerProtocolGroup
from .topic_regex import matching


class Names(Protocol):
    def names(self) -> list[str]:
        """Every name a regular expression may match."""

    def generation(self) -> int:
        """Grows whenever a topic or view is created."""


def member_matches(member: ConsumerMember, names: list[str]) -> frozenset[str]:
    """The names ``member``'s regular expression matches and the member may DESCRIBE."""
    if not member.subscribed_regex:
        return frozenset()
    return frozenset(name for name in matching(member.subscribed_regex, names) if member.may_describe(name))


def refresh_due(group: ConsumerProtocolGroup, generation: int, now: float, interval_s: float) -> bool:
    """Whether every regular expression of the group is resolved again at a heartbeat at
    ``now``: topics were created since the last resolution, or it is ``interval_s`` old."""
    return (group.regex_resolved_at is None or generation != group.regex_generation
            or now >= group.regex_resolved_at + interval_s)


def resolve(group: ConsumerProtocolGroup, catalog: Names, now: float,
            interval_s: float) -> dict[str, frozenset[str]]:
    """Member id -> the topics its regular expression resolves to after a heartbeat at
    ``now``: resolved again when due (``refresh_due``) or not resolved yet, kept otherwise.
    Records when the group was last resolved in full; the caller stores the answer in
    ``group.regex_matches``."""
    members = [m for m in group.members.values() if m.subscribed_regex]
    if not members:
        group.resolved_regexes = {}
        return {}
    generation = catalog.generation()
    everything = refresh_due(group, generation, now, interval_s)
    names: list[str] | None = None
    resolved: dict[str, frozenset[str]] = {}
    for member in members:
        kept = group.regex_matches.get(member.member_id)
        if (not everything and kept is not None
                and group.resolved_regexes.get(member.member_id) == member.subscribed_regex):
            resolved[member.member_id] = kept
            continue
        if names is None:
            names = catalog.names()
        resolved[member.member_id] = member_matches(member, names)
    if everything:
        group.regex_resolved_at, group.regex_generation = now, generation
    group.resolved_regexes = {m.member_id: m.subscribed_regex for m in members}
    return resolved

"""The answers ConsumerGroupHeartbeat (68) and ShareGroupHeartbeat (76) share: the same
response shape (member id, epoch, heartbeat interval, assignment by topic id)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..codec import Request, response_type
from ..codec.entities import make


def answered(request: Request, answer, *, drop_empty_topics: bool):
    """The response to a heartbeat the coordinator answered (``answer``: its HeartbeatAnswer);
    the assignment, when it is sent, lists topics in id order, partitions sorted."""
    if answer.error is not ErrorCode.none:
        return refused(request, answer.error, answer.message)
    assignment = None
    if answer.assignment is not None:
        assignment = dict(topic_partitions=[
            dict(topic_id=topic_id, partitions=sorted(partitions))
            for topic_id, partitions in sorted(answer.assignment.items(), key=lambda item: str(item[0]))
            if partitions or not drop_empty_topics
        ])
    return make(response_type(request), throttle_time=0, error_code=ErrorCode.none, error_message=None,
                member_id=answer.member_id, member_epoch=answer.member_epoch,
                heartbeat_interval=answer.heartbeat_interval_ms, assignment=assignment)


def refused(request: Request, code: ErrorCode, message: str | None = None):
    return make(response_type(request), throttle_time=0, error_code=code, error_message=message,
                member_id=None, member_epoch=0, heartbeat_interval=0, assignment=None)

"""Domain errors of share-partitions; the adapter maps them to Kafka's codes and keeps the message."""

from __future__ import annotations


class ShareError(Exception):
    """Base of the errors a share-partition answers a request with."""


class InvalidRecordState(ShareError):
    """Kafka's INVALID_RECORD_STATE (121): the record is not acquired by this member."""


class InvalidShareRequest(ShareError):
    """Kafka's INVALID_REQUEST (42): a malformed acknowledgement."""


class InvalidShareConfig(ShareError, ValueError):
    """A share group setting out of Kafka's range or syntax (INVALID_CONFIG at the edge)."""


class StateLogError(ShareError):
    """A record of ``__share_group_state`` this code cannot read (torn, unknown version)."""

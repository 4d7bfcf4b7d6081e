"""Domain errors inside, Kafka error codes at the edge: the one place that maps them."""

from __future__ import annotations

import logging

from kio.schema.errors import ErrorCode

from rmqkafka.rmqsemantics.filters import ExpressionError
from rmqkafka.rmqsemantics.semantics import SystemTopicError, ViewReadOnlyError
from rmqkafka.rmqsemantics.views import SourceInUseError, ViewError, ViewExistsError
from rmqkafka.storage import errors as storage_errors

from .topic_configs import InvalidConfig

log = logging.getLogger(__name__)


class CloseConnection(Exception):
    """The request cannot be answered in the protocol: the connection is closed instead."""


class InvalidTopicName(ValueError):
    pass


class InvalidReplication(ValueError):
    pass


class InvalidReplicaAssignment(ValueError):
    pass


_CODES: dict[type[Exception], ErrorCode] = {
    storage_errors.OffsetOutOfRangeError: ErrorCode.offset_out_of_range,
    # An fsync failed: Kafka answers KAFKA_STORAGE_ERROR for a log dir that went offline.
    storage_errors.StorageFailedError: ErrorCode.kafka_storage_error,
    # A damaged index entry: the partition cannot be read until the indexes are rebuilt.
    storage_errors.CorruptIndexError: ErrorCode.kafka_storage_error,
    # A write failed (disk full, I/O error): the append was taken back; clients retry.
    OSError: ErrorCode.kafka_storage_error,
    storage_errors.CorruptRecordError: ErrorCode.corrupt_message,
    storage_errors.InvalidRecordError: ErrorCode.invalid_record,
    storage_errors.RecordTooLargeError: ErrorCode.message_too_large,
    storage_errors.RecordListTooLargeError: ErrorCode.record_list_too_large,
    storage_errors.InvalidTimestampError: ErrorCode.invalid_timestamp,
    storage_errors.UnknownTopicError: ErrorCode.unknown_topic_or_partition,
    storage_errors.UnknownPartitionError: ErrorCode.unknown_topic_or_partition,
    storage_errors.TopicExistsError: ErrorCode.topic_already_exists,
    storage_errors.InvalidPartitionCountError: ErrorCode.invalid_partitions,
    storage_errors.OutOfOrderSequenceError: ErrorCode.out_of_order_sequence_number,
    storage_errors.InvalidProducerEpochError: ErrorCode.invalid_producer_epoch,
    storage_errors.CoordinatorFencedError: ErrorCode.transaction_coordinator_fenced,
    InvalidConfig: ErrorCode.invalid_config,
    ExpressionError: ErrorCode.invalid_config,
    ViewError: ErrorCode.invalid_config,
    ViewExistsError: ErrorCode.topic_already_exists,
    # DeleteTopics of a topic that views read from. The request is well-formed (so not
    # INVALID_REQUEST, "malformed" to clients) and deletion is not disabled (so not
    # TOPIC_DELETION_DISABLED): a broker rule refuses it, which is what POLICY_VIOLATION
    # means ("request parameters do not satisfy the configured policy"); Java raises
    # PolicyViolationException, librdkafka "Broker: Policy violation", neither retried.
    SourceInUseError: ErrorCode.policy_violation,
    # As Kafka answers an append to an internal topic ("Cannot append to internal topic").
    ViewReadOnlyError: ErrorCode.invalid_topic_exception,
    SystemTopicError: ErrorCode.invalid_topic_exception,
    InvalidTopicName: ErrorCode.invalid_topic_exception,
    InvalidReplication: ErrorCode.invalid_replication_factor,
    InvalidReplicaAssignment: ErrorCode.invalid_replica_assignment,
}


def error_code_for(exc: Exception) -> ErrorCode:
    """The Kafka error code for a domain error; unexpected errors are logged as bugs."""
    for cls in type(exc).__mro__:
        code = _CODES.get(cls)
        if code is not None:
            return code
    log.error("unexpected error answered as UNKNOWN_SERVER_ERROR", exc_info=exc)
    return ErrorCode.unknown_server_error

"""Kafka's default message for each error code: what ``Errors.X.message()`` says (Kafka's
clients/.../protocol/Errors.java, the exception's default message; kio carries the same text).

Responses with an ``error_message`` field get it when a handler has nothing more specific to
say (codec.entities.make): some clients cannot cope with a null message next to an error
(confluent-kafka 2.16 aborts the process on a refused DescribeUserScramCredentials), and a
tool showing the error then has a sentence to show.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode as _E

DEFAULT_MESSAGES: dict[int, str] = {
    _E.unknown_server_error: "The server experienced an unexpected error when processing the request.",
    _E.offset_out_of_range: (
        "The requested offset is not within the range of offsets maintained by the server."
    ),
    _E.corrupt_message: (
        "This message has failed its CRC checksum, exceeds the valid size, has a null key for a "
        "compacted topic, or is otherwise corrupt."
    ),
    _E.unknown_topic_or_partition: "This server does not host this topic-partition.",
    _E.invalid_fetch_size: "The requested fetch size is invalid.",
    _E.leader_not_available: (
        "There is no leader for this topic-partition as we are in the middle of a leadership "
        "election."
    ),
    _E.not_leader_or_follower: (
        "For requests intended only for the leader, this error indicates that the broker is not the "
        "current leader. For requests intended for any replica, this error indicates that the broker "
        "is not a replica of the topic partition."
    ),
    _E.request_timed_out: "The request timed out.",
    _E.broker_not_available: "The broker is not available.",
    _E.replica_not_available: (
        "The replica is not available for the requested topic-partition. Produce/Fetch requests and "
        "other requests intended only for the leader or follower return NOT_LEADER_OR_FOLLOWER if the"
        " broker is not a replica of the topic-partition."
    ),
    _E.message_too_large: (
        "The request included a message larger than the max message size the server will accept."
    ),
    _E.stale_controller_epoch: "The controller moved to another broker.",
    _E.offset_metadata_too_large: "The metadata field of the offset request was too large.",
    _E.network_exception: "The server disconnected before a response was received.",
    _E.coordinator_load_in_progress: "The coordinator is loading and hence can't process requests.",
    _E.coordinator_not_available: "The coordinator is not available.",
    _E.not_coordinator: "This is not the correct coordinator.",
    _E.invalid_topic_exception: "The request attempted to perform an operation on an invalid topic.",
    _E.record_list_too_large: (
        "The request included message batch larger than the configured segment size on the server."
    ),
    _E.not_enough_replicas: "Messages are rejected since there are fewer in-sync replicas than required.",
    _E.not_enough_replicas_after_append: (
        "Messages are written to the log, but to fewer in-sync replicas than required."
    ),
    _E.invalid_required_acks: "Produce request specified an invalid value for required acks.",
    _E.illegal_generation: "Specified group generation id is not valid.",
    _E.inconsistent_group_protocol: (
        "The group member's supported protocols are incompatible with those of existing members or "
        "first group member tried to join with empty protocol type or empty protocol list."
    ),
    _E.invalid_group_id: "The group id is invalid.",
    _E.unknown_member_id: "The coordinator is not aware of this member.",
    _E.invalid_session_timeout: (
        "The session timeout is not within the range allowed by the broker (as configured by "
        "group.min.session.timeout.ms and group.max.session.timeout.ms)."
    ),
    _E.rebalance_in_progress: "The group is rebalancing, so a rejoin is needed.",
    _E.invalid_commit_offset_size: "The committing offset data size is not valid.",
    _E.topic_authorization_failed: "Topic authorization failed.",
    _E.group_authorization_failed: "Group authorization failed.",
    _E.cluster_authorization_failed: "Cluster authorization failed.",
    _E.invalid_timestamp: "The timestamp of the message is out of acceptable range.",
    _E.unsupported_sasl_mechanism: "The broker does not support the requested SASL mechanism.",
    _E.illegal_sasl_state: "Request is not valid given the current SASL state.",
    _E.unsupported_version: "The version of API is not supported.",
    _E.topic_already_exists: "Topic with this name already exists.",
    _E.invalid_partitions: "Number of partitions is below 1.",
    _E.invalid_replication_factor: (
        "Replication factor is below 1 or larger than the number of available brokers."
    ),
    _E.invalid_replica_assignment: "Replica assignment is invalid.",
    _E.invalid_config: "Configuration is invalid.",
    _E.not_controller: "This is not the correct controller for this cluster.",
    _E.invalid_request: (
        "This most likely occurs because of a request being malformed by the client library or the "
        "message was sent to an incompatible broker. See the broker logs for more details."
    ),
    _E.unsupported_for_message_format: (
        "The message format version on the broker does not support the request."
    ),
    _E.policy_violation: "Request parameters do not satisfy the configured policy.",
    _E.out_of_order_sequence_number: "The broker received an out of order sequence number.",
    _E.duplicate_sequence_number: "The broker received a duplicate sequence number.",
    _E.invalid_producer_epoch: "Producer attempted to produce with an old epoch.",
    _E.invalid_txn_state: "The producer attempted a transactional operation in an invalid state.",
    _E.invalid_producer_id_mapping: (
        "The producer attempted to use a producer id which is not currently assigned to its "
        "transactional id."
    ),
    _E.invalid_transaction_timeout: (
        "The transaction timeout is larger than the maximum value allowed by the broker (as "
        "configured by transaction.max.timeout.ms)."
    ),
    _E.concurrent_transactions: (
        "The producer attempted to update a transaction while another concurrent operation on the "
        "same transaction was ongoing."
    ),
    _E.transaction_coordinator_fenced: (
        "Indicates that the transaction coordinator sending a WriteTxnMarker is no longer the current"
        " coordinator for a given producer."
    ),
    _E.transactional_id_authorization_failed: "Transactional Id authorization failed.",
    _E.security_disabled: "Security features are disabled.",
    _E.operation_not_attempted: (
        "The broker did not attempt to execute this operation. This may happen for batched RPCs where"
        " some operations in the batch failed, causing the broker to respond without trying the rest."
    ),
    _E.kafka_storage_error: "Disk error when trying to access log file on the disk.",
    _E.log_dir_not_found: "The user-specified log directory is not found in the broker config.",
    _E.sasl_authentication_failed: "SASL Authentication failed.",
    _E.unknown_producer_id: (
        "This exception is raised by the broker if it could not locate the producer metadata "
        "associated with the producerId in question. This could happen if, for instance, the "
        "producer's records were deleted because their retention time had elapsed. Once the last "
        "records of the producerId are removed, the producer's metadata is removed from the broker, "
        "and future appends by the producer will return this exception."
    ),
    _E.reassignment_in_progress: "A partition reassignment is in progress.",
    _E.delegation_token_auth_disabled: "Delegation Token feature is not enabled.",
    _E.delegation_token_not_found: "Delegation Token is not found on server.",
    _E.delegation_token_owner_mismatch: "Specified Principal is not valid Owner/Renewer.",
    _E.delegation_token_request_not_allowed: (
        "Delegation Token requests are not allowed on PLAINTEXT/1-way SSL channels and on delegation "
        "token authenticated channels."
    ),
    _E.delegation_token_authorization_failed: "Delegation Token authorization failed.",
    _E.delegation_token_expired: "Delegation Token is expired.",
    _E.invalid_principal_type: "Supplied principalType is not supported.",
    _E.non_empty_group: "The group is not empty.",
    _E.group_id_not_found: "The group id does not exist.",
    _E.fetch_session_id_not_found: "The fetch session ID was not found.",
    _E.invalid_fetch_session_epoch: "The fetch session epoch is invalid.",
    _E.listener_not_found: (
        "There is no listener on the leader broker that matches the listener on which metadata "
        "request was processed."
    ),
    _E.topic_deletion_disabled: "Topic deletion is disabled.",
    _E.fenced_leader_epoch: "The leader epoch in the request is older than the epoch on the broker.",
    _E.unknown_leader_epoch: "The leader epoch in the request is newer than the epoch on the broker.",
    _E.unsupported_compression_type: (
        "The requesting client does not support the compression type of given partition."
    ),
    _E.stale_broker_epoch: "Broker epoch has changed.",
    _E.offset_not_available: (
        "The leader high watermark has not caught up from a recent leader election so the offsets "
        "cannot be guaranteed to be monotonically increasing."
    ),
    _E.member_id_required: (
        "The group member needs to have a valid member id before actually entering a consumer group."
    ),
    _E.preferred_leader_not_available: "The preferred leader was not available.",
    _E.group_max_size_reached: "The group has reached its maximum size.",
    _E.fenced_instance_id: (
        "The broker rejected this static consumer since another consumer with the same "
        "group.instance.id has registered with a different member.id."
    ),
    _E.eligible_leaders_not_available: "Eligible topic partition leaders are not available.",
    _E.election_not_needed: "Leader election not needed for topic partition.",
    _E.no_reassignment_in_progress: "No partition reassignment is in progress.",
    _E.group_subscribed_to_topic: (
        "Deleting offsets of a topic is forbidden while the consumer group is actively subscribed to "
        "it."
    ),
    _E.invalid_record: "This record has failed the validation on broker and hence will be rejected.",
    _E.unstable_offset_commit: "There are unstable offsets that need to be cleared.",
    _E.throttling_quota_exceeded: "The throttling quota has been exceeded.",
    _E.producer_fenced: (
        "There is a newer producer with the same transactionalId which fences the current one."
    ),
    _E.resource_not_found: "A request illegally referred to a resource that does not exist.",
    _E.duplicate_resource: "A request illegally referred to the same resource twice.",
    _E.unacceptable_credential: "Requested credential would not meet criteria for acceptability.",
    _E.inconsistent_voter_set: (
        "Indicates that the either the sender or recipient of a voter-only request is not one of the "
        "expected voters."
    ),
    _E.invalid_update_version: "The given update version was invalid.",
    _E.feature_update_failed: "Unable to update finalized features due to an unexpected server error.",
    _E.principal_deserialization_failure: (
        "Request principal deserialization failed during forwarding. This indicates an internal error"
        " on the broker cluster security setup."
    ),
    _E.snapshot_not_found: "Requested snapshot was not found.",
    _E.position_out_of_range: (
        "Requested position is not greater than or equal to zero, and less than the size of the "
        "snapshot."
    ),
    _E.unknown_topic_id: "This server does not host this topic ID.",
    _E.duplicate_broker_registration: "This broker ID is already in use.",
    _E.broker_id_not_registered: "The given broker ID was not registered.",
    _E.inconsistent_topic_id: "The log's topic ID did not match the topic ID in the request.",
    _E.inconsistent_cluster_id: "The clusterId in the request does not match that found on the server.",
    _E.transactional_id_not_found: "The transactionalId could not be found.",
    _E.fetch_session_topic_id_error: "The fetch session encountered inconsistent topic ID usage.",
    _E.ineligible_replica: "The new ISR contains at least one ineligible replica.",
    _E.new_leader_elected: (
        "The AlterPartition request successfully updated the partition state but the leader has "
        "changed."
    ),
    _E.offset_moved_to_tiered_storage: "The requested offset is moved to tiered storage.",
    _E.fenced_member_epoch: (
        "The member epoch is fenced by the group coordinator. The member must abandon all its "
        "partitions and rejoin."
    ),
    _E.unreleased_instance_id: (
        "The instance ID is still used by another member in the consumer group. That member must "
        "leave first."
    ),
    _E.unsupported_assignor: "The assignor or its version range is not supported by the consumer group.",
    _E.stale_member_epoch: (
        "The member epoch is stale. The member must retry after receiving its updated member epoch "
        "via the ConsumerGroupHeartbeat API."
    ),
    _E.mismatched_endpoint_type: "The request was sent to an endpoint of the wrong type.",
    _E.unsupported_endpoint_type: "This endpoint type is not supported yet.",
    _E.unknown_controller_id: "This controller ID is not known.",
    _E.unknown_subscription_id: (
        "Client sent a push telemetry request with an invalid or outdated subscription ID."
    ),
    _E.telemetry_too_large: (
        "Client sent a push telemetry request larger than the maximum size the broker will accept."
    ),
    _E.invalid_registration: "The controller has considered the broker registration to be invalid.",
    _E.transaction_abortable: (
        "The server encountered an error with the transaction. The client can abort the transaction "
        "to continue using this transactional ID."
    ),
    _E.invalid_record_state: (
        "The record state is invalid. The acknowledgement of delivery could not be completed."
    ),
    _E.share_session_not_found: "The share session was not found.",
    _E.invalid_share_session_epoch: "The share session epoch is invalid.",
    _E.fenced_state_epoch: (
        "The share coordinator rejected the request because the share-group state epoch did not "
        "match."
    ),
    _E.invalid_voter_key: "The voter key doesn't match the receiving replica's key.",
    _E.duplicate_voter: "The voter is already part of the set of voters.",
    _E.voter_not_found: "The voter is not part of the set of voters.",
    _E.invalid_regular_expression: "The regular expression is not valid.",
    _E.rebootstrap_required: (
        "Client metadata is stale. The client should rebootstrap to obtain new metadata."
    ),
    _E.streams_invalid_topology: "The supplied topology is invalid.",
    _E.streams_invalid_topology_epoch: "The supplied topology epoch is invalid.",
    _E.streams_topology_fenced: "The supplied topology epoch is outdated.",
    _E.share_session_limit_reached: "The limit of share sessions has been reached.",
}


def default_message(code: int) -> str | None:
    """Kafka's message for ``code``; None for NONE (0) and for codes Kafka does not define."""
    return DEFAULT_MESSAGES.get(code)

"""What a subscription view may show a caller: its source's data only to who may read it.

A view is a window on its source topic, so every path that returns a view's records or
metadata checks the caller's rights on the source as well as on the view's own name
(``BrokerContext.allowed``): READ on the view (Fetch, OffsetCommit, OffsetDelete,
TxnOffsetCommit, DescribeProducers) needs READ on the source; DESCRIBE (Metadata,
ListOffsets, OffsetFetch, OffsetForLeaderEpoch, DescribeTopicPartitions) and
DESCRIBE_CONFIGS (which shows ``rmq.view.source``) need DESCRIBE on it. A view whose source
the caller may not describe is therefore hidden from listings and refused by name, exactly
as Kafka treats a topic the caller may not describe. Creating a view needs READ on the
source besides CREATE on the view's name: the view exposes the source's records.

Operations on the view's name alone (WRITE, DELETE, ALTER, ALTER_CONFIGS, CREATE) do not
look at the source; the refusals they end in (a view is read-only and immutable) name the
source only to a caller who may describe it.
"""

from __future__ import annotations

from .security.acls import AclOperation

# operation on a view -> what it needs on the view's source as well
SOURCE_OPERATION = {
    AclOperation.READ: AclOperation.READ,
    AclOperation.DESCRIBE: AclOperation.DESCRIBE,
    AclOperation.DESCRIBE_CONFIGS: AclOperation.DESCRIBE,
}
CREATE_VIEW_SOURCE_OPERATION = AclOperation.READ

"""Metadata (3): brokers, topics with ids, partitions with leader epochs; auto-creates topics.

Subscription views are listed like topics (rmqsemantics/views.py): their own stable id from
the view registry, the partitions of their source topic at this moment (so a view grows when
its source does), this node as leader, ``is_internal`` false. They appear when every topic is
asked for, by name and by id (v10+). A name that is a view is never auto-created as a topic.
Kafka's internal topics are flagged ``is_internal`` (adapter/internal_topics.py); asking for
``__consumer_offsets`` by name creates it as Kafka's auto-creation does.

Authorization (Kafka's rules): listing every topic lists those the caller may DESCRIBE; a
topic asked for by name or id without DESCRIBE is TOPIC_AUTHORIZATION_FAILED (by id with a
null name, so the id reveals nothing); auto-creation needs CREATE on the cluster or the
topic, else TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import uuid

from kio.schema.errors import ErrorCode
from rmqkafka.rmqsemantics.views import View
from rmqkafka.storage.errors import TopicExistsError
from rmqkafka.storage.topics import TopicMeta

from .. import acl_operations
from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext
from ..errors import error_code_for
from ..internal_topics import is_internal
from ..security.acls import CLUSTER_NAME, AclOperation, ResourceType
from ..topic_admin import auto_create

API_KEY = 3
ZERO_UUID = uuid.UUID(int=0)


def topic_entry(ctx: BrokerContext, meta: TopicMeta | View, with_operations: bool = False) -> dict:
    node = ctx.config.node_id
    semantics = ctx.semantics
    return dict(
        error_code=ErrorCode.none,
        name=meta.name,
        topic_id=semantics.id_of(meta),
        is_internal=is_internal(meta.name),
        partitions=[
            dict(
                error_code=ErrorCode.none,
                partition_index=p,
                leader_id=node,
                leader_epoch=0,
                replica_nodes=(node,),
                isr_nodes=(node,),
                offline_replicas=(),
            )
            for p in range(semantics.partition_count(meta))
        ],
        topic_authorized_operations=acl_operations.authorized(ctx, with_operations, ResourceType.TOPIC, meta.name),
    )


def _error_entry(name: str | None, code: ErrorCode, topic_id: uuid.UUID | None = None) -> dict:
    return dict(error_code=code, name=name, topic_id=topic_id or ZERO_UUID, is_internal=False, partitions=())


def _may_create(ctx: BrokerContext, name: str) -> bool:
    return (ctx.allowed(AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME)
            or ctx.allowed(AclOperation.CREATE, ResourceType.TOPIC, name))


async def handle(ctx: BrokerContext, request: Request):
    body = request.body
    store = ctx.store
    topic_operations = getattr(body, "include_topic_authorized_operations", False)

    def may_describe(name: str) -> bool:
        return ctx.allowed(AclOperation.DESCRIBE, ResourceType.TOPIC, name)

    wanted = body.topics
    if request.api_version == 0 and not wanted:
        wanted = None  # v0: an empty list means every topic
    topics: list[dict] = []
    if wanted is None:
        topics = [topic_entry(ctx, meta, topic_operations) for meta in ctx.semantics.listed()
                  if may_describe(meta.name)]
    else:
        may_create = getattr(body, "allow_auto_topic_creation", True) and ctx.config.auto_create_topics
        for item in wanted:
            topic_id = getattr(item, "topic_id", None)
            if request.api_version < 12 and (item.name is None or topic_id not in (None, ZERO_UUID)):
                # Kafka: names only before v12 (a response name may not be null there)
                topics.append(_error_entry(item.name or "", ErrorCode.invalid_request, topic_id))
                continue
            if item.name is None:
                meta = ctx.semantics.resolve_id(topic_id) if topic_id is not None else None
                if meta is None:
                    topics.append(_error_entry(None, ErrorCode.unknown_topic_id, topic_id))
                elif not may_describe(meta.name):
                    topics.append(_error_entry(None, ErrorCode.topic_authorization_failed, topic_id))
                else:
                    topics.append(topic_entry(ctx, meta, topic_operations))
                continue
            if not may_describe(item.name):
                topics.append(_error_entry(item.name, ErrorCode.topic_authorization_failed))
                continue
            meta = ctx.semantics.resolve(item.name)
            if meta is None and may_create and not _may_create(ctx, item.name):
                topics.append(_error_entry(item.name, ErrorCode.topic_authorization_failed))
                continue
            if meta is None and may_create:
                try:
                    meta = await auto_create(ctx, item.name)
                except TopicExistsError:
                    # another request's creation of it is not served yet: retriable, as
                    # Kafka answers for a topic being created
                    meta = ctx.semantics.resolve(item.name)
                    if meta is None:
                        topics.append(_error_entry(item.name, ErrorCode.leader_not_available))
                        continue
                except Exception as exc:  # an invalid name, mostly
                    topics.append(_error_entry(item.name, error_code_for(exc)))
                    continue
            if meta is None:
                topics.append(_error_entry(item.name, ErrorCode.unknown_topic_or_partition))
            else:
                topics.append(topic_entry(ctx, meta, topic_operations))
    return make(
        response_type(request),
        throttle_time=0,
        brokers=[
            dict(node_id=ctx.config.node_id, host=ctx.advertised_host, port=ctx.advertised_port, rack=None)
        ],
        cluster_id=store.cluster_id,
        controller_id=ctx.config.node_id,
        topics=topics,
        cluster_authorized_operations=acl_operations.authorized(
            ctx, getattr(body, "include_cluster_authorized_operations", False), ResourceType.CLUSTER, CLUSTER_NAME
        ),
        error_code=ErrorCode.none,
    )

"""AlterClientQuotas (49): set or remove quotas of user, client-id, user+client-id and IP
entities, or only check them (``validate_only``). Needs ALTER_CONFIGS on the cluster, else
every entry gets CLUSTER_AUTHORIZATION_FAILED.

Each entry is checked and answered on its own, as Kafka's ClientQuotaControlManager does
(adapter.client_quota_store has the rules and messages): an invalid entity or key, a value
not above 0 or a fraction for a whole-number key fails that entry only; a key given twice,
or an entity already altered by an earlier entry of the request, is "Ignoring duplicate
entity ...". Removing a key the entity does not have is no error. The valid entries are
stored together, durable before the answer (a failed write answers them
UNKNOWN_SERVER_ERROR, nothing changed); they apply to the next request of every client.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..client_quota_store import MAX_ENTITIES, Entity, QuotaRequestError, entity_text, validate_entity, validate_value
from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext
from ..security.acls import CLUSTER_NAME, AclOperation, ResourceType

API_KEY = 49


async def handle(ctx: BrokerContext, request: Request):
    body = request.body
    allowed = ctx.allowed(AclOperation.ALTER_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME)
    store = ctx.client_quotas.store
    results: dict[tuple, tuple[list[tuple[str, str | None]], ErrorCode, str | None]] = {}
    changes: dict[Entity, dict[str, float]] = {}
    for entry in body.entries:
        pairs = [(e.entity_type, e.entity_name) for e in entry.entity]
        key = tuple(sorted(dict(pairs).items()))  # Kafka's ClientQuotaEntity: a map
        if not allowed:
            results[key] = (pairs, ErrorCode.cluster_authorization_failed, None)
            continue
        ops: dict[str, float | None] = {}
        duplicate = key in results
        for op in entry.ops:
            duplicate = duplicate or op.key in ops
            ops[op.key] = None if op.remove else op.value
        if duplicate:
            results[key] = (pairs, ErrorCode.invalid_request, f"Ignoring duplicate entity {entity_text(pairs)}")
            continue
        try:
            entity = validate_entity(pairs)
            values = store.get(entity)
            for name, value in ops.items():
                if value is None:
                    values.pop(name, None)
                else:
                    validate_value(entity, name, value)
                    values[name] = value
            if values and not store.get(entity) and store.size + len(changes) >= MAX_ENTITIES:
                raise QuotaRequestError(ErrorCode.invalid_request,
                                        f"This broker keeps quotas for at most {MAX_ENTITIES} entities")
        except QuotaRequestError as exc:
            results[key] = (pairs, exc.code, str(exc))
            continue
        changes[entity] = values
        results[key] = (pairs, ErrorCode.none, None)
    if changes and not body.validate_only:
        try:
            store.set(changes)
        except OSError as exc:  # nothing changed
            results = {k: (pairs, ErrorCode.unknown_server_error, f"Client quotas could not be stored: {exc}")
                       if code is ErrorCode.none else (pairs, code, message)
                       for k, (pairs, code, message) in results.items()}
    return make(response_type(request), throttle_time=0, entries=[
        dict(error_code=code, error_message=message,
             entity=[dict(entity_type=kind, entity_name=name) for kind, name in pairs])
        for pairs, code, message in results.values()
    ])

"""IncrementalAlterConfigs (44, v0-1): SET / DELETE / APPEND / SUBTRACT topic configs.

Resource handling (topics, dynamic broker configs, errors, validate_only, persistence) is
AlterConfigs' (see alter_configs.py); only how the new overrides are computed differs.

Choices (following Kafka's ConfigurationControlManager.incrementalAlterConfigResource)
-------
- Operations apply in request order to the current overrides; the result is validated as a
  whole (adapter/topic_configs.py, adapter/broker_configs.py) and stored only if every
  operation is valid.
- SET: the new override. DELETE: back to the default; deleting a name that has no override
  changes nothing and is not an error, even for a name this broker does not know (Kafka
  never validates a deletion).
- APPEND / SUBTRACT: only for LIST-typed configs (else INVALID_CONFIG, "its type is not
  LIST"); the list is the current override or else the default, split on ",". APPEND adds
  the values not present yet, SUBTRACT removes them; the result becomes the override and
  is validated like a SET (an empty list is valid for ``cleanup.policy``, as in Kafka).
- A null value for anything but DELETE, or an unknown operation, is INVALID_REQUEST.
- BROKER_LOGGER (8), this API's only: the broker's log levels (adapter/broker_loggers.py).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from .. import broker_loggers
from ..broker_configs import check_resource_name
from ..codec import Request
from ..context import BrokerContext
from ..topic_configs import InvalidConfig
from .alter_configs import ALTERERS, BROKER_LOGGER, ConfigRefused, NewConfigs, ResourceKind, alter_resources

API_KEY = 44
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_NAMES = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}


def apply_operations(ctx: BrokerContext, resource, current: dict[str, str], kind: ResourceKind) -> dict[str, str]:
    configs = dict(current)
    for op in resource.configs:
        if op.config_operation not in _NAMES:
            raise ConfigRefused(ErrorCode.invalid_request, f"unknown config operation {op.config_operation}")
        if op.value is None and op.config_operation != DELETE:
            raise ConfigRefused(ErrorCode.invalid_request, f"null value not supported for {op.name}")
        if op.config_operation == SET:
            configs[op.name] = op.value
        elif op.config_operation == DELETE:
            configs.pop(op.name, None)
        else:
            value = kind.list_value(ctx, op.name, configs)
            if value is None:
                raise InvalidConfig(
                    f"can't {_NAMES[op.config_operation]} to key {op.name} because its type is not LIST"
                )
            items = _split(value)
            values = _split(op.value)
            if op.config_operation == APPEND:
                items += [v for v in dict.fromkeys(values) if v not in items]
            else:
                items = [v for v in items if v not in values]
            configs[op.name] = ",".join(items)
    return configs


def _split(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


class _Loggers(ResourceKind):
    def alter(self, ctx: BrokerContext, resource, new_configs: NewConfigs, validate_only: bool) -> None:
        if resource.resource_name == "":  # Kafka's RuntimeLoggerManager: this node's id only
            raise ConfigRefused(ErrorCode.invalid_request, "Node id must be an integer, but it is: ")
        check_resource_name(resource.resource_name, ctx.config.node_id)
        broker_loggers.alter([(c.name, c.config_operation, c.value) for c in resource.configs], validate_only)


_KINDS = {**ALTERERS, BROKER_LOGGER: _Loggers()}


async def handle(ctx: BrokerContext, request: Request):
    return alter_resources(ctx, request, apply_operations, _KINDS)

"""ACL request fields <-> security.acls values, shared by the three ACL handlers."""

from __future__ import annotations

from ..security.acls import (
    AclBinding,
    AclFilter,
    AclOperation,
    PatternType,
    PermissionType,
    ResourceType,
)


def acl_filter(item) -> AclFilter:
    """The filter of a DescribeAcls request or of one DeleteAcls filter (the schemas share
    field names). Codes this broker does not know become UNKNOWN, which validate() refuses."""
    return AclFilter(
        resource_type=_enum(ResourceType, item.resource_type_filter),
        resource_name=item.resource_name_filter,
        pattern_type=_enum(PatternType, item.pattern_type_filter),
        principal=item.principal_filter,
        host=item.host_filter,
        operation=_enum(AclOperation, item.operation),
        permission=_enum(PermissionType, item.permission_type),
    )


def acl_binding(item) -> AclBinding:
    """One CreateAcls creation as a binding (to be validated)."""
    return AclBinding(
        resource_type=_enum(ResourceType, item.resource_type),
        resource_name=item.resource_name,
        pattern_type=_enum(PatternType, item.resource_pattern_type),
        principal=item.principal,
        host=item.host,
        operation=_enum(AclOperation, item.operation),
        permission=_enum(PermissionType, item.permission_type),
    )


def _enum(kind, value: int):
    try:
        return kind(value)
    except ValueError:
        return kind(0)


def entry_fields(binding: AclBinding) -> dict:
    """The principal/host/operation/permission fields of one ACL in a response."""
    return dict(principal=binding.principal, host=binding.host, operation=int(binding.operation),
                permission_type=int(binding.permission))


def resource_fields(binding: AclBinding) -> dict:
    return dict(resource_type=int(binding.resource_type), resource_name=binding.resource_name,
                pattern_type=int(binding.pattern_type))

"""ACLs with Kafka's semantics: bindings and filters (bindings.py), the persisted store (store.py) and the
StandardAuthorizer that decides with them (authorizer.py); the enums and their protocol codes are in types.py."""
from .authorizer import StandardAuthorizer
from .bindings import (ANY_FILTER, AccessControlEntry, AccessControlEntryFilter, AclBinding, AclBindingFilter,
                       InvalidAclError, ResourcePattern, ResourcePatternFilter, validate_filter, validate_new_binding)
from .store import AclStore, AclStoreError
from .types import CLUSTER_NAME, WILDCARD, AclOperation, AclPermissionType, PatternType, ResourceType

__all__ = ["ANY_FILTER", "CLUSTER_NAME", "WILDCARD", "AccessControlEntry", "AccessControlEntryFilter", "AclBinding",
           "AclBindingFilter", "AclOperation", "AclPermissionType", "AclStore", "AclStoreError", "InvalidAclError",
           "PatternType", "ResourcePattern", "ResourcePatternFilter", "ResourceType", "StandardAuthorizer",
           "validate_filter", "validate_new_binding"]

"""ACLs and SCRAM credentials: CreateAcls, DescribeAcls, DeleteAcls,
DescribeUserScramCredentials, AlterUserScramCredentials (sent to any broker).

ACL bindings and filters are plain tuples of Kafka's codes, in Kafka's field order —
``(resource_type, name, pattern_type, principal, host, operation, permission)`` — so the
CLI (and anyone) names them with ``eoslog.security.acls``' enums or Kafka's numbers alike. A
filter's None name/principal/host matches anything. Errors raise the typed exception of
the first failure (CLUSTER_AUTHORIZATION_FAILED, SECURITY_DISABLED, INVALID_REQUEST...).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from eoslog.client.admin.core import AdminCore, raise_first, raise_for
from eoslog.client.versions import ApiVersionTable
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.messages import build, request_types

# (resource_type, name, pattern_type, principal, host, operation, permission)
Acl = tuple[int, str, int, str, str, int, int]
AclFilterSpec = tuple[int, str | None, int, str | None, str | None, int, int]


def _acl_filter(m: Any, cls: Any, f: AclFilterSpec) -> Any:
    return build(cls, resource_type_filter=f[0], resource_name_filter=f[1], pattern_type_filter=f[2],
                 principal_filter=f[3], host_filter=f[4], operation=f[5], permission_type=f[6])


class SecurityAdmin(AdminCore):
    async def create_acls(self, acls: Iterable[Acl], *, timeout_ms: int | None = None) -> None:
        wanted = list(acls)

        def make(versions: ApiVersionTable) -> Any:
            m = request_types(ApiKey.CREATE_ACLS, versions.pick(ApiKey.CREATE_ACLS, 3, 1))
            return build(m.CreateAclsRequest, creations=tuple(
                build(m.AclCreation, resource_type=a[0], resource_name=a[1], resource_pattern_type=a[2],
                      principal=a[3], host=a[4], operation=a[5], permission_type=a[6]) for a in wanted))

        def handle(_: int | None, response: Any) -> None:
            errors = {i: (int(r.error_code), r.error_message) for i, r in enumerate(response.results)
                      if int(r.error_code) != 0}
            raise_first(errors, range(len(wanted)))

        await self._call("create_acls", make, handle, timeout_ms=timeout_ms)

    async def describe_acls(self, flt: AclFilterSpec, *, timeout_ms: int | None = None) -> list[Acl]:
        def make(versions: ApiVersionTable) -> Any:
            m = request_types(ApiKey.DESCRIBE_ACLS, versions.pick(ApiKey.DESCRIBE_ACLS, 3, 1))
            return _acl_filter(m, m.DescribeAclsRequest, flt)

        def handle(_: int | None, response: Any) -> list[Acl]:
            if int(response.error_code) != 0:
                raise_for(int(response.error_code), response.error_message)
            return [(int(r.resource_type), str(r.resource_name), int(r.pattern_type), str(a.principal), str(a.host),
                     int(a.operation), int(a.permission_type)) for r in response.resources for a in r.acls]

        return await self._call("describe_acls", make, handle, timeout_ms=timeout_ms)

    async def delete_acls(self, filters: Iterable[AclFilterSpec], *, timeout_ms: int | None = None) -> list[Acl]:
        """Delete every ACL a filter matches; the ACLs deleted."""
        wanted = list(filters)

        def make(versions: ApiVersionTable) -> Any:
            m = request_types(ApiKey.DELETE_ACLS, versions.pick(ApiKey.DELETE_ACLS, 3, 1))
            return build(m.DeleteAclsRequest, filters=tuple(_acl_filter(m, m.DeleteAclsFilter, f) for f in wanted))

        def handle(_: int | None, response: Any) -> list[Acl]:
            errors = {i: (int(r.error_code), r.error_message) for i, r in enumerate(response.filter_results)
                      if int(r.error_code) != 0}
            raise_first(errors, range(len(wanted)))
            return [(int(a.resource_type), str(a.resource_name), int(a.pattern_type), str(a.principal), str(a.host),
                     int(a.operation), int(a.permission_type))
                    for r in response.filter_results for a in r.matching_acls]

        return await self._call("delete_acls", make, handle, timeout_ms=timeout_ms)

    async def describe_user_scram_credentials(self, users: Iterable[str] | None = None, *,
                                              timeout_ms: int | None = None) -> dict[str, list[tuple[int, int]]]:
        """User → [(mechanism type, iterations)]; every user when ``users`` is None."""
        names = None if users is None else list(users)

        def make(versions: ApiVersionTable) -> Any:
            m = request_types(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0)
            return m.DescribeUserScramCredentialsRequest(
                users=None if names is None else tuple(m.UserName(name=n) for n in names))

        def handle(_: int | None, response: Any) -> dict[str, list[tuple[int, int]]]:
            if int(response.error_code) != 0:
                raise_for(int(response.error_code), response.error_message)
            errors = {r.user: (int(r.error_code), r.error_message) for r in response.results if int(r.error_code)}
            raise_first(errors, [r.user for r in response.results])
            return {str(r.user): [(int(c.mechanism), int(c.iterations)) for c in r.credential_infos]
                    for r in response.results}

        return await self._call("describe_user_scram_credentials", make, handle, timeout_ms=timeout_ms)

    async def alter_user_scram_credentials(self, upsertions: Iterable[tuple[str, int, int, bytes, bytes]],
                                           deletions: Iterable[tuple[str, int]], *,
                                           timeout_ms: int | None = None) -> None:
        """Upsertions ``(user, mechanism type, iterations, salt, salted password)`` (the
        password itself never leaves the caller), deletions ``(user, mechanism type)``."""
        ups, dels = list(upsertions), list(deletions)

        def make(versions: ApiVersionTable) -> Any:
            m = request_types(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0)
            return m.AlterUserScramCredentialsRequest(
                deletions=tuple(build(m.ScramCredentialDeletion, name=n, mechanism=mech) for n, mech in dels),
                upsertions=tuple(build(m.ScramCredentialUpsertion, name=n, mechanism=mech, iterations=it, salt=salt,
                                       salted_password=salted) for n, mech, it, salt, salted in ups))

        def handle(_: int | None, response: Any) -> None:
            errors = {r.user: (int(r.error_code), r.error_message) for r in response.results if int(r.error_code)}
            raise_first(errors, [r.user for r in response.results])

        await self._call("alter_user_scram_credentials", make, handle, timeout_ms=timeout_ms)

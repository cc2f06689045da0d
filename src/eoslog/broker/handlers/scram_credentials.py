"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51), v0 (KIP-554).

Describe needs DESCRIBE on the cluster (a refusal fails the whole answer), Alter needs
ALTER on it (each user CLUSTER_AUTHORIZATION_FAILED). The client sends the salted
password, never the password; the broker stores the derived keys (``security/scram.py``)
in ``security/credentials.py`` before answering. Kafka's checks and codes: an unknown
mechanism UNSUPPORTED_SASL_MECHANISM, iterations outside 4096..16384 or an empty name
UNACCEPTABLE_CREDENTIAL, a user named twice DUPLICATE_RESOURCE, deleting or describing
what does not exist RESOURCE_NOT_FOUND.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from eoslog.broker.context import RequestContext
from eoslog.broker.handlers.base import NO_THROTTLE, ApiSpec, build, response_types
from eoslog.protocol.api_keys import ApiKey
from eoslog.protocol.errors import ErrorCode
from eoslog.protocol.scram import MIN_ITERATIONS, Mechanism
from eoslog.security.acls import AclOperation
from eoslog.security.scram import MAX_ITERATIONS, ScramCredential, credential_from_salted

if TYPE_CHECKING:
    from eoslog.protocol.requests import AlterUserScramCredentialsRequest, DescribeUserScramCredentialsRequest


async def handle_describe(ctx: RequestContext, request: DescribeUserScramCredentialsRequest) -> Any:
    module = response_types(ctx)
    if not ctx.allowed_on_cluster(AclOperation.DESCRIBE):
        # As Kafka's getErrorResponse: the error and its message on top and on each named user
        # (librdkafka aborts on a refusal without a message).
        message = "Cluster authorization failed."
        return build(module.DescribeUserScramCredentialsResponse, throttle_time=NO_THROTTLE,
                     error_code=ErrorCode.cluster_authorization_failed, error_message=message, results=tuple(
                         build(module.DescribeUserScramCredentialsResult, user=u.name,
                               error_code=ErrorCode.cluster_authorization_failed, error_message=message,
                               credential_infos=()) for u in request.users or ()))
    users = ctx.state.security.credentials.users()
    names = list(users) if not request.users else [u.name for u in request.users]
    counts = Counter(names)
    results = []
    for name in dict.fromkeys(names):
        infos: tuple[Any, ...] = ()
        if counts[name] > 1:
            code, msg = ErrorCode.duplicate_resource, f"Cannot describe SCRAM credentials for {name} twice"
        elif name not in users:
            code, msg = ErrorCode.resource_not_found, f"Attempt to describe nonexistent user: {name}"
        else:
            code, msg = ErrorCode.none, None
            infos = tuple(build(module.CredentialInfo, mechanism=m.kafka_type, iterations=c.iterations)
                          for m, c in sorted(users[name].items()))
        results.append(build(module.DescribeUserScramCredentialsResult, user=name, error_code=code,
                             error_message=msg, credential_infos=infos))
    return build(module.DescribeUserScramCredentialsResponse, throttle_time=NO_THROTTLE,
                 error_code=ErrorCode.none, error_message=None, results=tuple(results))


def _mechanism(user: str, value: int, errors: dict[str, tuple[ErrorCode, str]]) -> Mechanism | None:
    """The change's mechanism, or None when the user already failed or the mechanism is unknown."""
    if user in errors:
        return None
    try:
        return Mechanism.from_kafka_type(int(value))
    except ValueError:
        errors[user] = (ErrorCode.unsupported_sasl_mechanism, f"Unknown SCRAM mechanism {value}")
        return None


async def handle_alter(ctx: RequestContext, request: AlterUserScramCredentialsRequest) -> Any:
    module = response_types(ctx)
    store = ctx.state.security.credentials
    allowed = ctx.allowed_on_cluster(AclOperation.ALTER)
    counts = Counter([d.name for d in request.deletions] + [u.name for u in request.upsertions])
    errors: dict[str, tuple[ErrorCode, str]] = {}
    upserts: list[tuple[str, Mechanism, ScramCredential]] = []
    deletions: list[tuple[str, Mechanism]] = []
    for name in counts:
        if not allowed:
            errors[name] = (ErrorCode.cluster_authorization_failed, "")
        elif counts[name] > 1:
            errors[name] = (ErrorCode.duplicate_resource, "A user credential cannot be altered twice")
        elif not name:
            errors[name] = (ErrorCode.unacceptable_credential, "Username must not be empty")
    for d in request.deletions:
        mech = _mechanism(d.name, d.mechanism, errors)
        if mech is None:
            continue
        if store.get(d.name, mech) is None:
            errors[d.name] = (ErrorCode.resource_not_found, "Attempt to delete a user credential that does not exist")
        else:
            deletions.append((d.name, mech))
    for u in request.upsertions:
        mech = _mechanism(u.name, u.mechanism, errors)
        if mech is None:
            continue
        if not MIN_ITERATIONS <= int(u.iterations) <= MAX_ITERATIONS:
            errors[u.name] = (ErrorCode.unacceptable_credential,
                              f"Iterations {u.iterations} outside [{MIN_ITERATIONS}, {MAX_ITERATIONS}]")
        elif not u.salt or not u.salted_password:
            errors[u.name] = (ErrorCode.unacceptable_credential, "Salt and salted password must not be empty")
        else:
            upserts.append((u.name, mech, credential_from_salted(mech, u.salted_password, u.salt, int(u.iterations))))
    if upserts or deletions:
        await ctx.state.security.store_credentials(upserts, deletions)
    return build(module.AlterUserScramCredentialsResponse, throttle_time=NO_THROTTLE, results=tuple(
        build(module.AlterUserScramCredentialsResult, user=name, error_code=errors.get(name, (ErrorCode.none,))[0],
              error_message=errors[name][1] or None if name in errors else None)
        for name in counts))


APIS = [
    ApiSpec(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, "DescribeUserScramCredentials", 0, 0, handle_describe),
    ApiSpec(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, "AlterUserScramCredentials", 0, 0, handle_alter),
]

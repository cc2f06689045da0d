"""The domain's Kafka errors (eoslog.errors.Errors) against kio's ErrorCode table."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from eoslog.errors import Errors
from eoslog.protocol.errors import error_code, from_code


def test_every_member_is_kafkas_error_with_the_same_code() -> None:
    for e in Errors:
        assert e.name.lower() in ErrorCode.__members__, f"{e.name} is not one of Kafka's errors"
        kio_code = ErrorCode[e.name.lower()].value
        assert kio_code == e.code, f"{e.name}: code {e.code}, kio says {kio_code}"


def test_every_kafka_error_has_a_member() -> None:
    missing = sorted(c.name.upper() for c in ErrorCode if c.name.upper() not in Errors.__members__)
    assert not missing


def test_translation_both_ways() -> None:
    assert error_code(Errors.PRODUCER_FENCED) is ErrorCode.producer_fenced
    assert error_code(Errors.NONE) is ErrorCode.none
    assert from_code(int(ErrorCode.not_enough_replicas)) is Errors.NOT_ENOUGH_REPLICAS
    assert from_code(32_000) is Errors.UNKNOWN_SERVER_ERROR
    assert str(Errors.INVALID_TXN_STATE) == "INVALID_TXN_STATE"

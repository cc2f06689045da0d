from typing import TypeVar

_T = TypeVar("_T", bound=tuple[object, ...])

def decode_fields(
    body: bytes, start: int, end: int, count: int, base_offset: int, base_timestamp: int, /
) -> list[tuple[int, int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]]: ...
def decode_consumer_records(
    body: bytes, start: int, end: int, count: int, base_offset: int, base_timestamp: int, min_offset: int,
    record_type: type[_T], topic: str, partition: int, timestamp_type: int, leader_epoch: int | None,
    batch_timestamp: int | None, /,
) -> list[_T]: ...

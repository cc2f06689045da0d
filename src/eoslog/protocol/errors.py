"""Kafka error codes, from kio's ``ErrorCode`` (an IntEnum that knows ``retriable``).

Storage and coordinators raise domain exceptions carrying the Kafka error *name*
(``"CORRUPT_MESSAGE"``); only handlers turn names into codes, so nothing below the
broker imports kio.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

__all__ = ["ErrorCode", "error_code"]


def error_code(name: str) -> ErrorCode:
    """``"MESSAGE_TOO_LARGE"`` → ``ErrorCode.message_too_large``."""
    try:
        return ErrorCode[name.lower()]
    except KeyError:
        return ErrorCode.unknown_server_error

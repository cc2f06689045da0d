"""Kafka error codes at the protocol edge: kio's ``ErrorCode`` (an IntEnum that knows
``retriable``) and the translation from the domain's ``eoslog.errors.Errors``.

Records, storage and coordinators answer with ``Errors`` members; only handlers (and the
client) turn them into codes, so nothing below the broker imports kio.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from eoslog.errors import Errors

__all__ = ["ErrorCode", "error_code", "from_code"]


_CODES: dict[Errors, ErrorCode] = {e: ErrorCode(e.code) for e in Errors}


def error_code(error: Errors) -> ErrorCode:
    """``Errors.MESSAGE_TOO_LARGE`` → ``ErrorCode.message_too_large`` (a dict look-up: this
    runs for every partition of every response)."""
    return _CODES[error]


def from_code(code: int) -> Errors:
    """A code from a response → its domain error (UNKNOWN_SERVER_ERROR if unknown)."""
    try:
        return Errors(code)
    except ValueError:
        return Errors.UNKNOWN_SERVER_ERROR

"""Payment events: what the upstream service writes, and the rules that make one valid.

The Spark job (``job.py``) applies these rules in Spark SQL; the verifier applies this
module's Python version to the committed input and compares. Both say the same thing:

- the value is a JSON object (else ``malformed JSON``);
- ``type`` is ``payment`` (``end-of-stream`` is the service's closing event: it carries
  only an event time, which moves the watermark past the last window; anything else is
  ``unknown event type``);
- ``payment_id``, ``account``, ``amount``, ``currency``, ``event_time`` are present;
- ``amount`` is a decimal string with at most two decimals, greater than zero;
- ``currency`` is one of ``CURRENCIES``;
- ``event_time`` is a UTC ISO-8601 timestamp (``2026-01-01T00:04:59.400Z``).

Balances are per account, currency and tumbling event-time ``WINDOW``; an event may
arrive up to ``MAX_LATENESS`` after later ones, well inside the ``WATERMARK_DELAY``, so
the watermark never drops a valid payment and every balance is exact.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal

WINDOW = timedelta(minutes=5)
WATERMARK_DELAY = timedelta(minutes=2)
MAX_LATENESS = timedelta(seconds=30)
EVENT_SPACING = timedelta(milliseconds=600)  # event time between consecutive payments
EVENT_TIME_START = datetime(2026, 1, 1, tzinfo=UTC)
CURRENCIES = ("EUR", "USD", "GBP")
ACCOUNTS = tuple(f"acct-{i:03d}" for i in range(1, 9))
HOME_CURRENCY = {a: CURRENCIES[i % len(CURRENCIES)] for i, a in enumerate(ACCOUNTS)}

# The same patterns in Spark SQL (job.py): one definition of "valid" for both sides.
AMOUNT_PATTERN = r"^-?[0-9]+(\.[0-9]{1,2})?$"
EVENT_TIME_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?Z$"
REQUIRED = ("payment_id", "account", "amount", "currency", "event_time")

# The reasons a dead-lettered event carries.
MALFORMED = "malformed JSON"
UNKNOWN_TYPE = "unknown event type"
BAD_AMOUNT = "amount is not a decimal with at most 2 decimals"
NOT_POSITIVE = "amount must be positive"
BAD_CURRENCY = "unsupported currency"
BAD_EVENT_TIME = "event_time is not a UTC ISO-8601 timestamp"


def missing(field: str) -> str:
    return f"missing {field}"


@dataclass(frozen=True)
class Payment:
    payment_id: str
    account: str
    amount: Decimal
    currency: str
    event_time: datetime

    @property
    def window_start(self) -> datetime:
        return window_start(self.event_time)


@dataclass(frozen=True)
class Invalid:
    reason: str


@dataclass(frozen=True)
class EndOfStream:
    event_time: datetime


def window_start(t: datetime) -> datetime:
    """The start of the tumbling window holding ``t`` (windows start at the epoch, as Spark's)."""
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    return epoch + ((t - epoch) // WINDOW) * WINDOW


def format_time(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def parse_time(text: str) -> datetime | None:
    if not re.match(EVENT_TIME_PATTERN, text):
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def classify(value: bytes | None) -> Payment | Invalid | EndOfStream:
    """What an event is, by the rules in the module docstring."""
    try:
        doc = json.loads(value or b"")
    except ValueError:
        return Invalid(MALFORMED)
    if not isinstance(doc, dict):
        return Invalid(MALFORMED)
    fields = {k: (None if v is None else str(v)) for k, v in doc.items()}
    kind = fields.get("type")
    if kind == "end-of-stream":
        t = parse_time(fields.get("event_time") or "")
        return EndOfStream(t) if t is not None else Invalid(BAD_EVENT_TIME)
    if kind != "payment":
        return Invalid(UNKNOWN_TYPE)
    for name in REQUIRED:
        if fields.get(name) is None:
            return Invalid(missing(name))
    amount_text, currency, time_text = str(fields["amount"]), str(fields["currency"]), str(fields["event_time"])
    if not re.match(AMOUNT_PATTERN, amount_text):
        return Invalid(BAD_AMOUNT)
    amount = Decimal(amount_text)
    if amount <= 0:
        return Invalid(NOT_POSITIVE)
    if currency not in CURRENCIES:
        return Invalid(BAD_CURRENCY)
    t = parse_time(time_text)
    if t is None:
        return Invalid(BAD_EVENT_TIME)
    return Payment(str(fields["payment_id"]), str(fields["account"]), amount, currency, t)


# -- what the upstream service sends ---------------------------------------------------------


@dataclass(frozen=True)
class Event:
    key: bytes
    value: bytes


def _invalid_event(rng: random.Random, payment: dict[str, str]) -> bytes:
    """One of the ways upstream data goes wrong, chosen at random."""
    broken = dict(payment)
    kind = rng.randrange(7)
    if kind == 0:
        return json.dumps(payment).encode()[: rng.randrange(5, 40)]  # cut short
    if kind == 1:
        del broken[rng.choice(REQUIRED)]
    elif kind == 2:
        broken["amount"] = rng.choice(["12,50", "ten", "1e3", "3.141"])
    elif kind == 3:
        broken["amount"] = rng.choice(["0.00", "-25.00", "-0.01"])
    elif kind == 4:
        broken["currency"] = rng.choice(["XXX", "eur", "BTC"])
    elif kind == 5:
        broken["event_time"] = rng.choice(["yesterday", "2026-01-01 00:00:00", "1767225600"])
    else:
        broken["type"] = rng.choice(["refund", "PAYMENT"])
    return json.dumps(broken).encode()


def plan_events(count: int, invalid_share: float, seed: int) -> list[Event]:
    """``count`` events in the order the service sends them, then the end-of-stream event.

    Event times advance by EVENT_SPACING per event, each held back by up to MAX_LATENESS
    (arrivals out of order); a share of the events is invalid in one of several ways."""
    rng = random.Random(seed)
    events: list[Event] = []
    latest = EVENT_TIME_START
    for i in range(count):
        account = rng.choice(ACCOUNTS)
        t = EVENT_TIME_START + i * EVENT_SPACING - timedelta(seconds=rng.uniform(0, MAX_LATENESS.total_seconds()))
        t = max(t, EVENT_TIME_START)
        latest = max(latest, t)
        payment = {
            "type": "payment",
            "payment_id": f"pay-{seed}-{i:06d}",
            "account": account,
            "amount": f"{rng.randrange(1, 50_000) / 100:.2f}",
            "currency": HOME_CURRENCY[account],
            "event_time": format_time(t),
        }
        value = _invalid_event(rng, payment) if rng.random() < invalid_share else json.dumps(payment).encode()
        events.append(Event(account.encode(), value))
    # Closes the stream: the watermark (its time minus the delay) passes the last window's end.
    closing = window_start(latest) + WINDOW + WATERMARK_DELAY
    events.append(Event(b"end-of-stream", json.dumps({"type": "end-of-stream",
                                                       "event_time": format_time(closing)}).encode()))
    return events

"""A fault-injecting TCP proxy between Kafka clients and the broker.

It understands Kafka framing (int32 size + payload) in both directions, remembers which
API each correlation id belongs to, and can, per response, at random or by script:

- ``drop``: swallow the response the broker already produced (the request *was* applied)
  and close the client connection, so the client must retry something that succeeded —
  at random (``drop_probability``) or exactly the Nth responses of an API
  (``drop_responses``, deterministic, so a test can assert each kind was dropped); with
  ``refuse_after_drop`` every connection opened after the drop is closed at once until the
  next policy (a leader killed before answering: the retry waits in the client's queue while
  its connections already open go on);
- ``close_mid_request``: forward half of a request frame, then cut both sides;
- ``delay``: hold a response for some seconds before forwarding it (the connection's later
  responses wait behind it; long enough, it is a client-side timeout);
- ``hold``: keep every request of the given API keys (and what follows on its connection)
  from the broker until ``release()``: a request that arrives late, after whatever the test
  did meanwhile on other connections (the hanging transaction, KIP-890).

Point clients at the proxy and start the broker with
``advertised.listeners=PLAINTEXT://127.0.0.1:<proxy port>`` so that every connection a
client opens after bootstrap also goes through it. The proxy runs its own asyncio loop on
a background thread so synchronous tests (confluent-kafka, kafka-python) can use it.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import struct
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

PRODUCE = 0
FETCH = 1
ADD_PARTITIONS_TO_TXN = 24
END_TXN = 26


@dataclass
class FaultPolicy:
    """What to do to responses of the listed API keys. Probabilities are per response."""

    api_keys: frozenset[int] = frozenset({PRODUCE})
    drop_probability: float = 0.0
    close_mid_request_probability: float = 0.0
    delay_probability: float = 0.0
    delay_seconds: float = 0.5
    # api key -> the ordinals (1 = first) of its responses to drop, counted from set_policy
    # over all connections; these apply whatever api_keys says.
    drop_responses: Mapping[int, frozenset[int]] = field(default_factory=dict)
    refuse_after_drop: bool = False
    seed: int = 1


@dataclass
class _Conn:
    inflight: dict[int, int] = field(default_factory=dict)  # correlation id -> api key


class FaultProxy:
    def __init__(self, target_host: str, target_port: int, listen_port: int = 0) -> None:
        self.target = (target_host, target_port)
        self.listen_port = listen_port
        self.policy = FaultPolicy()
        self.injected: Counter[str] = Counter()
        self.responses: Counter[int] = Counter()  # per api key, since the policy was set
        self.dropped: Counter[int] = Counter()  # per api key
        self.held: Counter[int] = Counter()  # requests held back, per api key
        self._hold: tuple[frozenset[int], asyncio.Event] | None = None
        self._refusing = False  # a drop under refuse_after_drop happened
        self.refused = 0  # connections closed at once since
        self._rng = random.Random(self.policy.seed)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._lock = threading.Lock()

    # -- control (any thread) ----------------------------------------------------------

    def start(self) -> FaultProxy:
        ready = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            self._server = loop.run_until_complete(
                asyncio.start_server(self._serve, "127.0.0.1", self.listen_port)
            )
            self.listen_port = self._server.sockets[0].getsockname()[1]
            ready.set()
            loop.run_forever()

        self._thread = threading.Thread(target=run, name="fault-proxy", daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.listen_port}"

    def set_policy(self, policy: FaultPolicy) -> None:
        with self._lock:
            self.policy = policy
            self._rng = random.Random(policy.seed)
            self.responses.clear()
            self._refusing = False

    def hold(self, *api_keys: int) -> None:
        """Hold requests of ``api_keys`` from now until ``release()`` (``held`` counts them)."""
        self._hold = (frozenset(api_keys), asyncio.Event())

    def release(self) -> None:
        """Forward the held requests, and hold no more."""
        hold, self._hold = self._hold, None
        if hold is not None:
            self._call(hold[1].set)

    def heal(self) -> None:
        """Stop injecting faults (connections stay up)."""
        self.set_policy(FaultPolicy())

    def cut_all(self) -> None:
        """Close every proxied connection now."""
        self._call(lambda: [w.close() for w in list(self._writers)])

    def stop(self) -> None:
        if self._loop is None:
            return

        async def shutdown() -> None:
            assert self._server is not None
            self._server.close()
            for w in list(self._writers):
                w.close()

        fut = asyncio.run_coroutine_threadsafe(shutdown(), self._loop)
        with contextlib.suppress(Exception):
            fut.result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(5)

    def _call(self, fn: Callable[[], object]) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(fn)

    # -- proxying (loop thread) ------------------------------------------------------

    def _decide(self, api_key: int) -> str | None:
        with self._lock:
            p = self.policy
            self.responses[api_key] += 1
            if self.responses[api_key] in p.drop_responses.get(api_key, ()):
                return "drop"
            if api_key not in p.api_keys:
                return None
            r = self._rng.random()
            for action, prob in (("drop", p.drop_probability), ("delay", p.delay_probability)):
                if r < prob:
                    return action
                r -= prob
            return None

    async def _serve(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        if self._refusing:
            self.refused += 1
            client_w.close()
            return
        try:
            broker_r, broker_w = await asyncio.open_connection(*self.target)
        except OSError:
            client_w.close()
            return
        self._writers.update((client_w, broker_w))
        conn = _Conn()

        def close_both() -> None:
            client_w.close()
            broker_w.close()

        async def upstream() -> None:
            while True:
                size_b = await client_r.readexactly(4)
                (size,) = struct.unpack(">i", size_b)
                payload = await client_r.readexactly(size)
                if size >= 8:
                    api_key, _, corr = struct.unpack_from(">hhi", payload)
                    conn.inflight[corr] = api_key
                    hold = self._hold
                    if hold is not None and api_key in hold[0]:
                        self.held[api_key] += 1
                        await hold[1].wait()
                    if api_key in self.policy.api_keys and self._decide_mid_request(api_key):
                        broker_w.write(size_b + payload[: size // 2])
                        await broker_w.drain()
                        self.injected["close_mid_request"] += 1
                        close_both()
                        return
                broker_w.write(size_b + payload)
                await broker_w.drain()

        async def downstream() -> None:
            while True:
                size_b = await broker_r.readexactly(4)
                (size,) = struct.unpack(">i", size_b)
                payload = await broker_r.readexactly(size)
                corr = struct.unpack_from(">i", payload)[0] if size >= 4 else -1
                api_key = conn.inflight.pop(corr, -1)
                action = self._decide(api_key)
                if action == "drop":
                    self.injected["drop"] += 1
                    self.dropped[api_key] += 1
                    self._refusing = self._refusing or self.policy.refuse_after_drop
                    close_both()
                    return
                if action == "delay":
                    self.injected["delay"] += 1
                    await asyncio.sleep(self.policy.delay_seconds)
                client_w.write(size_b + payload)
                await client_w.drain()

        tasks = [asyncio.create_task(upstream()), asyncio.create_task(downstream())]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in tasks:
                t.cancel()
            close_both()
            self._writers.discard(client_w)
            self._writers.discard(broker_w)

    def _decide_mid_request(self, api_key: int) -> bool:
        with self._lock:
            p = self.policy
            if p.close_mid_request_probability <= 0:
                return False
            return self._rng.random() < p.close_mid_request_probability


class FaultRig:
    """A real broker whose clients all go through a FaultProxy, and a kill -9 on demand.

    The broker advertises the proxy's address, so every connection a client opens after
    bootstrap passes through it too.
    """

    def __init__(self, tmp: Path, partitions: int) -> None:
        from support.harness import BrokerProcess, free_port

        proxy_port = free_port()
        self.broker = BrokerProcess(tmp / "data", overrides={
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy_port}",
            "num.partitions": str(partitions),
        }).start()
        self.proxy = FaultProxy("127.0.0.1", self.broker.port, proxy_port).start()
        self.killed = threading.Event()

    @property
    def bootstrap(self) -> str:
        return self.proxy.address

    def kill_and_restart(self) -> None:
        """kill -9 the broker, cut the proxied connections, restart on the same port and data."""
        self.broker.kill()
        self.proxy.cut_all()
        time.sleep(0.5)
        self.broker.start()
        self.killed.set()

    def close(self) -> None:
        self.proxy.stop()
        if self.broker.alive():
            self.broker.stop()

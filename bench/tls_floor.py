"""What Python's ssl costs per GB on this machine, apart from the broker: the floor under
eoslog's TLS listeners (issue 28). uvloop's and asyncio's TLS transports run an
``ssl.SSLObject`` over two ``ssl.MemoryBIO``s in the event loop's thread; this drives one such
pair (a throw-away CA's certificate, TLS 1.3 as librdkafka negotiates it) in one process:

    python bench/tls_floor.py [--mb 64] [--repeat 5]

- encrypt a Fetch-like response handed over whole (as writelines did before 2026-11-29) and in
  256 KB pieces (``connection.TLS_WRITE_BYTES``), the outgoing BIO read after each;
- encrypt 16 KB writes (a producer's records), and decrypt them as the broker receives them,
  256 KB of ciphertext per socket read into a 256 KB application buffer;
- AES-256-GCM alone (``cryptography``'s AESGCM, 16 KB records) and one copy into a fresh
  buffer, for scale.

CPU seconds per GB (process time), best of ``--repeat`` (another process only ever slows a
pass). Output: a table and bench/results/tls-floor-<timestamp>.json. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import ssl
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from rich.console import Console
from rich.table import Table

from common import RESULTS_DIR, machine_facts
from eoslog.cli.certs import make_dev_certs

PIECE = 256 * 1024
RECORD = 16 * 1024


def tls_pair(certs: Path) -> tuple[ssl.SSLObject, ssl.MemoryBIO, ssl.MemoryBIO, ssl.SSLObject, ssl.MemoryBIO,
                                   ssl.MemoryBIO]:
    """A handshaken (server, its incoming BIO, its outgoing BIO, client, client's in, out)."""
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(str(certs / "broker.pem"))
    client_ctx = ssl.create_default_context(cafile=str(certs / "ca.pem"))
    s_in, s_out, c_in, c_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    server = server_ctx.wrap_bio(s_in, s_out, server_side=True)
    client = client_ctx.wrap_bio(c_in, c_out, server_hostname="localhost")
    for _ in range(10):
        for side in (client, server):
            with contextlib.suppress(ssl.SSLWantReadError):
                side.do_handshake()
        s_in.write(c_out.read())
        c_in.write(s_out.read())
    return server, s_in, s_out, client, c_in, c_out


def best_s_per_gb(run: Callable[[], int], repeat: int) -> float:
    """Best CPU seconds per GB of ``run`` (which returns the bytes it moved)."""
    out = []
    for _ in range(repeat):
        t = time.process_time()
        n = run()
        out.append((time.process_time() - t) / (n / 2**30))
    return min(out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mb", type=int, default=64, help="MB per pass")
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="eoslog-tls-floor-") as tmp:
        certs = make_dev_certs(Path(tmp) / "certs", clients=())
        server, _, s_out, client, _, c_out = tls_pair(certs)
        # Decrypting needs every record in order: a pair of its own, whose client encrypts only for it.
        receiver, r_in, _, sender, _, sender_out = tls_pair(certs)
        machine = machine_facts(Path(tmp))
    data = os.urandom(1 << 20)
    # A Fetch response's shape: a small header, then ~1 MB of records per partition.
    response = [b"h" * 60] + [data[:-100], b"p" * 40, data[:900_000]] * 3
    passes = max(1, args.mb * 2**20 // sum(map(len, response)))

    def whole() -> int:
        for _ in range(passes):
            for piece in response:
                server.write(piece)
            s_out.read()
        return passes * sum(map(len, response))

    def pieces() -> int:
        for _ in range(passes):
            for buf in response:
                view = memoryview(buf)
                for i in range(0, len(view), PIECE):
                    server.write(view[i : i + PIECE])
                    s_out.read()
        return passes * sum(map(len, response))

    view = memoryview(data)
    mb = args.mb

    def client_records() -> int:
        for _ in range(mb):
            for i in range(0, len(view), RECORD):
                client.write(view[i : i + RECORD])
            c_out.read()
        return mb * len(view)

    app = bytearray(PIECE)

    def decrypt_pass() -> tuple[float, int]:
        """``mb`` MB of the client's 16 KB records (encrypted first, untimed: the server must see
        every record in order), fed 256 KB at a time; the decrypting's CPU seconds."""
        blobs = []
        for _ in range(mb):
            for i in range(0, len(view), RECORD):
                sender.write(view[i : i + RECORD])
            blobs.append(sender_out.read())
        t = time.process_time()
        for blob in blobs:
            mv = memoryview(blob)
            for i in range(0, len(mv), PIECE):
                r_in.write(mv[i : i + PIECE])
                while True:
                    try:
                        if not receiver.read(len(app), app):
                            break
                    except ssl.SSLWantReadError:
                        break
        return time.process_time() - t, mb * len(view)

    aes, nonce = AESGCM(os.urandom(32)), os.urandom(12)

    def raw_aes() -> int:
        for _ in range(mb):
            for i in range(0, len(view), RECORD):
                aes.encrypt(nonce, view[i : i + RECORD], None)
        return mb * len(view)

    def one_copy() -> int:
        for _ in range(mb):
            bytearray(view)
        return mb * len(view)

    figures = {
        "encrypt, a response handed over whole": best_s_per_gb(whole, args.repeat),
        "encrypt, 256 KB pieces": best_s_per_gb(pieces, args.repeat),
        "encrypt, 16 KB writes (a producer's)": best_s_per_gb(client_records, args.repeat),
        "decrypt, 16 KB records, 256 KB reads": min(s / (n / 2**30) for s, n in
                                                     (decrypt_pass() for _ in range(args.repeat))),
        "AES-256-GCM alone, 16 KB records": best_s_per_gb(raw_aes, args.repeat),
        "one copy into a fresh buffer": best_s_per_gb(one_copy, args.repeat),
    }
    console = Console(width=120)
    table = Table("what", "CPU s per GB", title=f"Python's ssl ({ssl.OPENSSL_VERSION}), {server.version()} "
                  f"{server.cipher()[0]}, best of {args.repeat}")  # type: ignore[index]
    for what, s in figures.items():
        table.add_row(what, f"{s:.2f}")
    console.print(table)
    console.print(f"load average {os.getloadavg()}")
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    results = {"timestamp": stamp, "machine": machine, "openssl": ssl.OPENSSL_VERSION,
               "protocol": server.version(), "cipher": server.cipher()[0],  # type: ignore[index]
               "mb": args.mb, "repeat": args.repeat, "cpu_s_per_gb": {k: round(v, 3) for k, v in figures.items()},
               "load_avg_at_end": [round(x, 2) for x in os.getloadavg()]}
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    (RESULTS_DIR / f"tls-floor-{stamp}.json").write_text(json.dumps(results, indent=1))
    console.print(f"saved {RESULTS_DIR / f'tls-floor-{stamp}.json'}")


if __name__ == "__main__":
    main()

"""``eoslog certs dev DIR``: a throw-away CA and broker/client certificates for local TLS.

Everything is made fresh (``cryptography``), never committed: the tests call
``make_dev_certs`` into a temporary directory. Files, all PEM:

- ``ca.pem`` — the CA certificate (``ssl.truststore.location`` of brokers and clients);
- ``broker.pem`` — the broker's key and certificate in one file (``ssl.keystore.location``),
  also as ``broker-cert.pem`` / ``broker-key.pem``; valid for the ``--host`` names;
- ``NAME.pem`` / ``NAME-cert.pem`` / ``NAME-key.pem`` for each ``--client`` (mTLS, subject
  ``CN=NAME,OU=eoslog-dev``).
"""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from eoslog.cli.common import app

if TYPE_CHECKING:
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric.ec import EllipticCurvePrivateKey

certs_app = typer.Typer(help="Development certificates for TLS listeners (never for production).",
                        no_args_is_help=True)
app.add_typer(certs_app, name="certs")

VALID_DAYS = 30


def _key() -> EllipticCurvePrivateKey:
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


def _name(cn: str, ou: str = "eoslog-dev") -> x509.Name:
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, ou),
                      x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _write(directory: Path, stem: str, key: EllipticCurvePrivateKey, cert: x509.Certificate) -> None:
    from cryptography.hazmat.primitives import serialization

    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    cert_pem = cert.public_bytes(serialization.Encoding.PEM)
    files = ((f"{stem}-key.pem", key_pem), (f"{stem}-cert.pem", cert_pem), (f"{stem}.pem", key_pem + cert_pem))
    for name, data in files:
        path = directory / name
        path.write_bytes(data)
        if "key" in name or name == f"{stem}.pem":
            path.chmod(0o600)


def _issue(subject: x509.Name, key: EllipticCurvePrivateKey, issuer: x509.Name, issuer_key: EllipticCurvePrivateKey,
           *, ca: bool = False, hosts: tuple[str, ...] = ()) -> x509.Certificate:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes

    now = datetime.datetime.now(datetime.UTC)
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(key.public_key())
               .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
               .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if hosts:
        names: list[x509.GeneralName] = []
        for h in hosts:
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(h)))
            except ValueError:
                names.append(x509.DNSName(h))
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def make_dev_certs(directory: Path, hosts: tuple[str, ...] = ("localhost", "127.0.0.1"),
                   clients: tuple[str, ...] = ("client",), ca_name: str = "eoslog-dev-ca") -> Path:
    """Write a new CA, a broker certificate for ``hosts`` and client certificates."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = _key()
    ca_subject = _name(ca_name)
    ca_cert = _issue(ca_subject, ca_key, ca_subject, ca_key, ca=True)
    _write(directory, "ca", ca_key, ca_cert)
    (directory / "ca.pem").write_bytes((directory / "ca-cert.pem").read_bytes())  # the truststore: no key
    broker_key = _key()
    _write(directory, "broker", broker_key, _issue(_name(hosts[0]), broker_key, ca_subject, ca_key, hosts=hosts))
    for client in clients:
        key = _key()
        _write(directory, client, key, _issue(_name(client), key, ca_subject, ca_key))
    return directory


@certs_app.command("dev")
def dev(
    directory: Annotated[Path, typer.Argument(help="where to write the PEM files")],
    host: Annotated[list[str] | None, typer.Option("--host", help="broker host name or IP (repeatable)")] = None,
    client: Annotated[list[str] | None, typer.Option("--client", help="client certificate CN (repeatable)")] = None,
) -> None:
    """Make a throw-away CA, a broker certificate and client certificates (PEM). The broker's
    certificate (for --host names) also serves the console over HTTPS."""
    hosts = tuple(host or ("localhost", "127.0.0.1"))
    out = make_dev_certs(directory, hosts, tuple(client or ("client",)))
    typer.echo(f"wrote a development CA and certificates to {out}: ssl.keystore.location={out / 'broker.pem'} "
               f"ssl.truststore.location={out / 'ca.pem'}; eoslog console --certfile {out / 'broker-cert.pem'} "
               f"--keyfile {out / 'broker-key.pem'}")

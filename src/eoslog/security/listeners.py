"""Listeners as Kafka names them: ``listeners``, ``listener.security.protocol.map``,
``advertised.listeners``, and the TLS context an SSL or SASL_SSL listener serves with.

``listeners=PLAINTEXT://127.0.0.1:9092,SASL_SSL://0.0.0.0:9093`` opens two sockets; a
listener's name maps to its security protocol through the protocol map (the four protocol
names map to themselves, so ``CLIENT://..`` needs ``CLIENT:SASL_SSL`` in the map). Metadata
answers each client with the advertised address of the listener it connected to.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from enum import StrEnum

from eoslog.client.errors import ConfigException
from eoslog.client.security import ClientSecurity, client_security
from eoslog.config import BrokerConfig, ConfigError, parse_listener


class SecurityProtocol(StrEnum):
    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"

    @property
    def uses_tls(self) -> bool:
        return self in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)

    @property
    def uses_sasl(self) -> bool:
        return self in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)


@dataclass(frozen=True, slots=True)
class Listener:
    name: str
    protocol: SecurityProtocol
    host: str
    port: int


def _protocol_map(config: BrokerConfig) -> dict[str, SecurityProtocol]:
    out: dict[str, SecurityProtocol] = {}
    for item in str(config["listener.security.protocol.map"]).split(","):
        if not item.strip():
            continue
        name, sep, proto = item.partition(":")
        try:
            out[name.strip().upper()] = SecurityProtocol(proto.strip().upper())
        except ValueError:
            raise ConfigError(f"listener.security.protocol.map: {item!r} is not NAME:PROTOCOL with PROTOCOL one of "
                              + ", ".join(SecurityProtocol)) from None
        if not sep:
            raise ConfigError(f"listener.security.protocol.map: {item!r} is not NAME:PROTOCOL")
    return out


def _parse(spec: str, protocols: dict[str, SecurityProtocol], key: str) -> list[Listener]:
    out: list[Listener] = []
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        name = item.split("://", 1)[0].upper() if "://" in item else "PLAINTEXT"
        if name not in protocols:
            raise ConfigError(f"{key}: listener {name} has no entry in listener.security.protocol.map")
        host, port = parse_listener(item)
        out.append(Listener(name, protocols[name], host, port))
    if len({lst.name for lst in out}) != len(out):
        raise ConfigError(f"{key}: each listener name may appear once ({spec!r})")
    return out


def listeners(config: BrokerConfig) -> list[Listener]:
    """Every listener to bind, in the order ``listeners`` names them (at least one)."""
    found = _parse(str(config["listeners"]), _protocol_map(config), "listeners")
    if not found:
        raise ConfigError("listeners is empty")
    return found


def advertised_listeners(config: BrokerConfig) -> dict[str, tuple[str, int]]:
    """Listener name → (host, port) given to clients; port 0 means 'the bound port'."""
    spec = str(config["advertised.listeners"] or "")
    if not spec:
        return {}
    known = {lst.name for lst in listeners(config)}
    out: dict[str, tuple[str, int]] = {}
    for lst in _parse(spec, _protocol_map(config), "advertised.listeners"):
        if lst.name not in known:
            raise ConfigError(f"advertised.listeners: {lst.name} is not one of the listeners")
        out[lst.name] = (lst.host, lst.port)
    return out


_TLS_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


def listener_value(config: BrokerConfig, listener: str, key: str) -> str:
    """Kafka's per-listener override ``listener.name.<name>.<key>`` (name in lower case),
    else the broker-wide ``key``."""
    prefixed = f"listener.name.{listener.lower()}.{key}"
    return str(config.values[prefixed] if prefixed in config.values else config[key])


def server_ssl_context(config: BrokerConfig, listener: str) -> ssl.SSLContext:
    """The TLS side of an SSL or SASL_SSL listener: PEM keystore and truststore, TLS 1.2+,
    ``ssl.client.auth`` (required: no certificate, no connection); each setting may be
    given per listener (``listener.name.ssl.ssl.client.auth=required``)."""

    def value(key: str) -> str:
        return listener_value(config, listener, key)

    keystore = value("ssl.keystore.location")
    if not keystore:
        raise ConfigError("an SSL or SASL_SSL listener needs ssl.keystore.location (a PEM certificate chain and key)")
    versions = []
    for name in value("ssl.enabled.protocols").split(","):
        if name.strip() not in _TLS_VERSIONS:
            raise ConfigError(f"ssl.enabled.protocols: {name.strip()!r} is not served; use TLSv1.2 and/or TLSv1.3")
        versions.append(_TLS_VERSIONS[name.strip()])
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version, ctx.maximum_version = min(versions), max(versions)
    try:
        ctx.load_cert_chain(keystore, password=value("ssl.key.password") or None)
        truststore = value("ssl.truststore.location")
        if truststore:
            ctx.load_verify_locations(truststore)
    except (OSError, ssl.SSLError) as e:
        raise ConfigError(f"cannot load the TLS keystore or truststore: {e}") from None
    client_auth = value("ssl.client.auth")
    if client_auth not in ("required", "requested", "none"):
        raise ConfigError(f"ssl.client.auth={client_auth}; valid values are required, requested, none")
    if client_auth != "none" and not truststore:
        raise ConfigError(f"ssl.client.auth={client_auth} needs ssl.truststore.location")
    ctx.verify_mode = {"required": ssl.CERT_REQUIRED, "requested": ssl.CERT_OPTIONAL}.get(client_auth, ssl.CERT_NONE)
    return ctx


def inter_broker_security(config: BrokerConfig) -> tuple[str | None, ClientSecurity]:
    """(listener name or None for the first, the client side of it) for this broker's
    connections to the others: inter.broker.listener.name's protocol, the broker's own
    login (listener.name.<name>.<mechanism>.sasl.jaas.config), truststore and, over TLS, its
    own keystore as the client certificate (Kafka's inter-broker client presents it): the
    other brokers' listener may require one (ssl.client.auth=required), and on SSL its DN is
    the broker's principal."""
    name = str(config["inter.broker.listener.name"]) or None
    if name is None:
        first = listeners(config)[0]
        if first.protocol is not SecurityProtocol.PLAINTEXT:  # the client below would speak plaintext to it
            raise ConfigError(f"inter.broker.listener.name is empty, so brokers would reach each other on the first "
                              f"listener, {first.name} ({first.protocol}), without its security: name the "
                              "inter-broker listener (inter.broker.listener.name), with "
                              "sasl.mechanism.inter.broker.protocol and its login where it uses SASL")
        return None, ClientSecurity()
    protocol = _protocol_map(config).get(name)
    if protocol is None:
        raise ConfigError(f"inter.broker.listener.name={name} is not in listener.security.protocol.map")
    raw: dict[str, str] = {"security_protocol": protocol.value}
    if protocol.uses_tls:
        raw["ssl_ca_location"] = listener_value(config, name, "ssl.truststore.location")
        raw["ssl_keystore_location"] = listener_value(config, name, "ssl.keystore.location")
        raw["ssl_key_password"] = listener_value(config, name, "ssl.key.password")
    if protocol in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL):
        mechanism = str(config["sasl.mechanism.inter.broker.protocol"]).upper()
        raw["sasl_mechanism"] = mechanism
        raw["sasl_jaas_config"] = str(config.values.get(f"listener.name.{name.lower()}.{mechanism.lower()}"
                                                        ".sasl.jaas.config", ""))
    try:
        return name, client_security(raw)
    except ConfigException as e:
        raise ConfigError(f"inter-broker security: {e}") from None


_ACL_SETTINGS = ("super.users", "allow.everyone.if.no.acl.found", "authorizer.log.level")


def unprotected_settings(config: BrokerConfig, bound: list[Listener]) -> list[str]:
    """One warning per setting that asks for protection it does not get with these listeners:
    ACL settings without an authorizer, ``ssl.client.auth`` on a listener without TLS,
    ``sasl.enabled.mechanisms`` with no SASL listener. Only settings given (``explicit``):
    a default asks for nothing. Kafka accepts these silently; an operator reading them
    expects protection, so the broker says what to add."""
    given = config.explicit
    out: list[str] = []
    if not str(config["authorizer.class.name"]).strip():
        out += [f"{key}={config.static[key]} has no effect: no authorizer is configured, so every principal may do "
                "everything; add authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer"
                for key in _ACL_SETTINGS if key in given]
    # ssl.client.auth for every listener, listener.name.<name>.ssl.client.auth for one.
    tls = [lst for lst in bound if lst.protocol.uses_tls]
    asked = {key: ([] if key == "ssl.client.auth" else
                   [lst for lst in bound if key == f"listener.name.{lst.name.lower()}.ssl.client.auth"])
             for key in given if key.endswith("ssl.client.auth") and str(config.values[key]) != "none"}
    for key, named in sorted(asked.items()):
        if (key == "ssl.client.auth" and not tls) or (key != "ssl.client.auth" and not any(
                lst.protocol.uses_tls for lst in named)):
            where = ", ".join(f"{lst.name} ({lst.protocol})" for lst in (named or bound)) or "no such listener"
            out.append(f"{key}={config.static[key]} has no effect on {where}: client certificates need TLS; "
                       "use an SSL or SASL_SSL listener")
    if "sasl.enabled.mechanisms" in given and not any(lst.protocol.uses_sasl for lst in bound):
        out.append(f"sasl.enabled.mechanisms={config.static['sasl.enabled.mechanisms']} has no effect: no "
                   "listener uses SASL, so nobody authenticates; add a SASL_SSL (or SASL_PLAINTEXT) listener "
                   "to listeners")
    return out

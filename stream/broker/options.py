"""Connection options of every kafka-python client, from settings or ``PREFSTREAM_*`` variables."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from learners.exceptions import InvalidParameterError

__all__ = ["DEFAULT_BOOTSTRAP", "kafka_client_options", "local_bootstrap"]

#: Bootstrap address of the local broker started by ``deploy/kafka/start.sh`` (default port).
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


def local_bootstrap() -> str:
    """Address of the local broker: ``127.0.0.1:$PREFSTREAM_KAFKA_PORT`` (default 9092)."""
    return f"127.0.0.1:{os.environ.get('PREFSTREAM_KAFKA_PORT') or 9092}"


#: environment variable -> kafka-python keyword argument
ENV_OPTIONS: dict[str, str] = {
    "PREFSTREAM_BOOTSTRAP": "bootstrap_servers",
    "PREFSTREAM_SECURITY_PROTOCOL": "security_protocol",
    "PREFSTREAM_SASL_MECHANISM": "sasl_mechanism",
    "PREFSTREAM_SASL_USERNAME": "sasl_plain_username",
    "PREFSTREAM_SASL_PASSWORD": "sasl_plain_password",
    "PREFSTREAM_SSL_CAFILE": "ssl_cafile",
}
# settings keys accepted besides the kafka-python names themselves
_SETTING_ALIASES: dict[str, str] = {
    "bootstrap": "bootstrap_servers",
    "bootstrap_servers": "bootstrap_servers",
    "security_protocol": "security_protocol",
    "sasl_mechanism": "sasl_mechanism",
    "sasl_username": "sasl_plain_username",
    "sasl_plain_username": "sasl_plain_username",
    "sasl_password": "sasl_plain_password",
    "sasl_plain_password": "sasl_plain_password",
    "ssl_cafile": "ssl_cafile",
}
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI")


def kafka_client_options(settings_or_env: Mapping[str, Any] | Any | None = None) -> dict[str, Any]:
    """Keyword arguments for kafka-python clients from settings or the environment.

    Parameters
    ----------
    settings_or_env : Mapping or object or None
        Where to read the connection options from:

        * ``None``: the process environment (``os.environ``);
        * a mapping with ``PREFSTREAM_*`` keys (an environment-like dict): those variables,
          ``PREFSTREAM_BOOTSTRAP``, ``PREFSTREAM_SECURITY_PROTOCOL``, ``PREFSTREAM_SASL_MECHANISM``,
          ``PREFSTREAM_SASL_USERNAME``, ``PREFSTREAM_SASL_PASSWORD``, ``PREFSTREAM_SSL_CAFILE``;
        * any other mapping or an object with attributes (e.g. the CLI's settings): keys
          ``bootstrap`` / ``bootstrap_servers``, ``security_protocol``, ``sasl_mechanism``,
          ``sasl_username`` / ``sasl_plain_username``, ``sasl_password`` /
          ``sasl_plain_password``, ``ssl_cafile``.

        Empty or ``None`` values are ignored.

    Returns
    -------
    dict
        ``{"bootstrap_servers": str, ...}``: always the bootstrap servers (default: the local
        broker, :func:`local_bootstrap`, i.e. ``127.0.0.1:9092``), plus only the security options that were given, ready to be
        passed as ``KafkaProducer(**options)``, ``KafkaConsumer(topic, **options)`` or
        ``KafkaAdminClient(**options)``. The protocol and mechanism are upper-cased.

    Raises
    ------
    InvalidParameterError
        If the security protocol or SASL mechanism is unknown, a SASL protocol lacks its
        mechanism, PLAIN/SCRAM lack username or password, or the CA file does not exist.

    Examples
    --------
    >>> kafka_client_options({"PREFSTREAM_BOOTSTRAP": "kafka-1:9093,kafka-2:9093",
    ...                       "PREFSTREAM_SECURITY_PROTOCOL": "sasl_ssl",
    ...                       "PREFSTREAM_SASL_MECHANISM": "SCRAM-SHA-512",
    ...                       "PREFSTREAM_SASL_USERNAME": "alice",
    ...                       "PREFSTREAM_SASL_PASSWORD": "s3cret"})["security_protocol"]
    'SASL_SSL'
    >>> kafka_client_options({})
    {'bootstrap_servers': '127.0.0.1:9092'}
    """
    owner = "kafka_client_options"
    source: Mapping[str, Any] | Any = os.environ if settings_or_env is None else settings_or_env
    raw: dict[str, Any] = {}
    if isinstance(source, Mapping):
        if any(str(k).startswith("PREFSTREAM_") for k in source):
            for env_name, kw in ENV_OPTIONS.items():
                raw[kw] = source.get(env_name)
        else:
            for key, kw in _SETTING_ALIASES.items():
                if source.get(key) not in (None, ""):
                    raw[kw] = source[key]
    else:
        for key, kw in _SETTING_ALIASES.items():
            value = getattr(source, key, None)
            if value not in (None, ""):
                raw[kw] = value
    opts = {k: v for k, v in raw.items() if v not in (None, "")}

    bootstrap = opts.get("bootstrap_servers") or local_bootstrap()
    if isinstance(bootstrap, (list, tuple)):
        bootstrap = ",".join(str(b) for b in bootstrap)
    bootstrap = str(bootstrap).strip()
    servers = [s.strip() for s in bootstrap.split(",") if s.strip()]
    if not servers or any(":" not in s for s in servers):
        raise InvalidParameterError(
            f"The 'bootstrap_servers' parameter of {owner} must be a comma-separated list of "
            f"host:port pairs, e.g. '127.0.0.1:9092'. Got {bootstrap!r} instead. "
            "Set PREFSTREAM_BOOTSTRAP or the 'bootstrap' setting."
        )
    opts["bootstrap_servers"] = ",".join(servers)

    protocol = str(opts.get("security_protocol", "PLAINTEXT")).upper()
    if protocol not in SECURITY_PROTOCOLS:
        raise InvalidParameterError(
            f"The 'security_protocol' parameter of {owner} must be one of {SECURITY_PROTOCOLS}. "
            f"Got {opts.get('security_protocol')!r} instead (PREFSTREAM_SECURITY_PROTOCOL)."
        )
    if "security_protocol" in opts:
        opts["security_protocol"] = protocol
    if "sasl_mechanism" in opts:
        mech = str(opts["sasl_mechanism"]).upper()
        if mech not in SASL_MECHANISMS:
            raise InvalidParameterError(
                f"The 'sasl_mechanism' parameter of {owner} must be one of {SASL_MECHANISMS}. "
                f"Got {opts['sasl_mechanism']!r} instead (PREFSTREAM_SASL_MECHANISM)."
            )
        opts["sasl_mechanism"] = mech
    if protocol.startswith("SASL_"):
        mech = opts.get("sasl_mechanism")
        if mech is None:
            raise InvalidParameterError(
                f"The 'sasl_mechanism' parameter of {owner} must be set when security_protocol "
                f"is {protocol}. Got None instead; set PREFSTREAM_SASL_MECHANISM "
                "(e.g. PLAIN or SCRAM-SHA-512)."
            )
        if mech in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512") and not (
            opts.get("sasl_plain_username") and opts.get("sasl_plain_password")
        ):
            raise InvalidParameterError(
                f"SASL mechanism {mech} in {owner} needs a username and a password. Got "
                f"username={opts.get('sasl_plain_username')!r} and "
                f"password={'<set>' if opts.get('sasl_plain_password') else None}; set "
                "PREFSTREAM_SASL_USERNAME and PREFSTREAM_SASL_PASSWORD."
            )
    elif "sasl_mechanism" in opts:
        raise InvalidParameterError(
            f"The 'sasl_mechanism' parameter of {owner} is only used with security_protocol "
            f"SASL_PLAINTEXT or SASL_SSL. Got it with security_protocol {protocol!r}; set "
            "PREFSTREAM_SECURITY_PROTOCOL=SASL_SSL (or SASL_PLAINTEXT)."
        )
    if "ssl_cafile" in opts:
        cafile = str(opts["ssl_cafile"])
        if not os.path.isfile(cafile):
            raise InvalidParameterError(
                f"The 'ssl_cafile' parameter of {owner} must be an existing PEM file. Got "
                f"{cafile!r}, which does not exist (PREFSTREAM_SSL_CAFILE)."
            )
        opts["ssl_cafile"] = cafile
    return opts


def _client_options(bootstrap: str | None, client_options: Mapping[str, Any] | None) -> dict:
    opts = dict(client_options) if client_options else {}
    if bootstrap:
        opts["bootstrap_servers"] = bootstrap
    opts.setdefault("bootstrap_servers", local_bootstrap())
    return opts

"""Why a secured connection fails: one line naming a TLS or SASL cause, found in one attempt.

kafka-python and aiokafka retry a failed bootstrap until their timeout and then report only
"Unable to bootstrap"; the real cause (a certificate the CA file does not verify, a wrong SASL
password) stays in their logs. :func:`connection_failure` opens ONE connection per bootstrap
server with aiokafka's ``create_conn`` (TLS handshake + SASL authentication) and turns the
exceptions that no retry can cure into a sentence; :func:`stream.broker.wait_for_broker` asks it
first, so ``prefstream topics create``, ``replay``, ``tail`` and the workers stop within a
second with that sentence instead of waiting for a broker that will never let them in.
"""

from __future__ import annotations

import asyncio
import ssl
import threading
from collections.abc import Mapping
from typing import Any

__all__ = ["connection_failure", "ssl_context"]


def ssl_context(security_protocol: str, cafile: str | None) -> ssl.SSLContext | None:
    """The client TLS context of every aiokafka/Faust client: ``None`` unless the protocol is *SSL.

    Parameters
    ----------
    security_protocol : str
        ``PLAINTEXT``, ``SSL``, ``SASL_PLAINTEXT`` or ``SASL_SSL``.
    cafile : str or None
        PEM file of the CA that signed the brokers' certificates; ``None`` trusts the system CAs.

    Returns
    -------
    ssl.SSLContext or None
        A default client context (certificate and host name verified) for ``SSL``/``SASL_SSL``.
    """
    if not str(security_protocol).upper().endswith("SSL"):
        return None
    return ssl.create_default_context(cafile=cafile) if cafile else ssl.create_default_context()


def _servers(bootstrap: Any) -> list[tuple[str, int]]:
    items = bootstrap if isinstance(bootstrap, (list, tuple)) else str(bootstrap).split(",")
    out = []
    for item in items:
        host, _, port = str(item).strip().rpartition(":")
        if host and port.isdigit():
            out.append((host.strip("[]"), int(port)))
    return out


def _cause(exc: BaseException, host: str, port: int, opts: Mapping[str, Any]) -> str | None:
    """The sentence for an exception no retry can cure, else ``None``."""
    from aiokafka import errors as ak

    where = f"{host}:{port}"
    if isinstance(exc, ssl.SSLCertVerificationError):
        cafile = opts.get("ssl_cafile")
        trust = (f"ssl_cafile {cafile} (PREFSTREAM_SSL_CAFILE)" if cafile
                 else "the system CAs (no ssl_cafile / PREFSTREAM_SSL_CAFILE set)")
        return (f"TLS handshake with {where} failed: certificate verify failed "
                f"({exc.verify_message or exc.reason}); {trust} must hold the CA that signed the "
                "broker's certificate, issued for the host name in the bootstrap address.")
    if isinstance(exc, ssl.SSLError):
        return (f"TLS handshake with {where} failed: {exc.reason or exc} (is {where} a listener "
                f"for security_protocol {opts.get('security_protocol')}?).")
    if isinstance(exc, (ak.SaslAuthenticationFailed, ak.AuthenticationFailedError)):
        detail = str(exc).removeprefix("[Error 58] SaslAuthenticationFailed: ").strip() or type(exc).__name__
        return (f"SASL authentication failed at {where} as user {opts.get('sasl_plain_username')!r} "
                f"with {opts.get('sasl_mechanism')}: {detail}. Check PREFSTREAM_SASL_USERNAME, "
                "PREFSTREAM_SASL_PASSWORD and PREFSTREAM_SASL_MECHANISM.")
    if isinstance(exc, (ak.UnsupportedSaslMechanismError, ak.IllegalSaslStateError)):
        return (f"SASL authentication failed at {where}: the broker refused mechanism "
                f"{opts.get('sasl_mechanism')} ({exc}); set PREFSTREAM_SASL_MECHANISM to one it enables.")
    return None


async def _probe(opts: Mapping[str, Any], timeout: float) -> str | None:
    from aiokafka.conn import create_conn

    protocol = str(opts.get("security_protocol") or "PLAINTEXT").upper()
    kwargs = {"security_protocol": protocol,
              "ssl_context": ssl_context(protocol, opts.get("ssl_cafile")),
              "request_timeout_ms": int(max(timeout, 0.5) * 1000)}
    for key in ("sasl_mechanism", "sasl_plain_username", "sasl_plain_password"):
        if opts.get(key) is not None:
            kwargs[key] = opts[key]
    for host, port in _servers(opts.get("bootstrap_servers", "")):
        try:
            conn = await asyncio.wait_for(create_conn(host, port, client_id="prefstream-diagnose", **kwargs), timeout)
        except Exception as exc:  # noqa: BLE001 - classified below; the rest is left to the caller's retries
            cause = _cause(exc, host, port, opts)
            if cause is not None:
                return cause
            continue
        conn.close()
        return None  # one server let us in: nothing to report
    return None


def connection_failure(client_options: Mapping[str, Any], timeout: float = 5.0) -> str | None:
    """One connection attempt per bootstrap server; a sentence if TLS or SASL refused it.

    Parameters
    ----------
    client_options : Mapping
        kafka-python connection options (:func:`stream.broker.kafka_client_options`,
        :meth:`stream.settings.Settings.kafka_client_options`): ``bootstrap_servers``,
        ``security_protocol``, ``ssl_cafile``, ``sasl_mechanism``, ``sasl_plain_username``,
        ``sasl_plain_password``.
    timeout : float, default 5
        Seconds per server.

    Returns
    -------
    str or None
        ``"TLS handshake with host:port failed: certificate verify failed (...); ..."`` or
        ``"SASL authentication failed at host:port as user 'u' with PLAIN: ..."`` when a server
        answered but refused the handshake or the credentials (retrying cannot help); ``None``
        when a server let us in, or when every server failed for a reason waiting may cure
        (connection refused, timeout), which the caller's retries and message cover.

    Examples
    --------
    >>> connection_failure({"bootstrap_servers": "127.0.0.1:1"}) is None  # refused: not our business
    True
    """
    result: list[str | None] = [None]

    def run() -> None:
        result[0] = asyncio.run(_probe(client_options, timeout))

    try:
        asyncio.get_running_loop()
    except RuntimeError:  # no loop in this thread: run here
        run()
    else:  # called from async code (e.g. a server's startup): keep its loop free
        t = threading.Thread(target=run, name="prefstream-diagnose", daemon=True)
        t.start()
        t.join()
    return result[0]

"""The local single-node broker: start, stop, status (``deploy/kafka/*.sh``) and the readiness probe."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from learners.exceptions import InvalidParameterError, PrefstreamError
from stream.broker.options import _client_options, local_bootstrap

__all__ = ["BrokerError", "broker_status", "start_broker", "stop_broker", "wait_for_broker"]

REPO_ROOT = Path(__file__).resolve().parents[2]
#: The broker's scripts and Maven project: ``deploy/kafka`` of a checkout, or the copy an installed
#: wheel carries as package data (``stream/_deploy/kafka``; in a checkout ``stream/_deploy`` links
#: to ``deploy``).
KAFKA_DEPLOY_DIR = next((d for d in (REPO_ROOT / "deploy" / "kafka",
                                     Path(__file__).resolve().parents[1] / "_deploy" / "kafka")
                         if (d / "start.sh").is_file()), REPO_ROOT / "deploy" / "kafka")


class BrokerError(PrefstreamError, RuntimeError):
    """The local broker could not be started, stopped or reached."""


def _script(name: str) -> Path:
    path = KAFKA_DEPLOY_DIR / name
    if not path.is_file():
        raise BrokerError(
            f"{path} not found: this installation lacks the local broker's scripts (deploy/kafka). "
            "Reinstall prefstream from a wheel built with them, run from a checkout, or point "
            "PREFSTREAM_BOOTSTRAP at an existing cluster."
        )
    return path


def start_broker(timeout: float = 120) -> str:
    """Start the local single-node broker unless it already runs; return its bootstrap address.

    Runs ``deploy/kafka/start.sh`` (which resolves the jars with Maven and formats the storage
    on first use), then checks with kafka-python that the broker answers.

    Parameters
    ----------
    timeout : float
        Seconds to wait for the broker to answer after the JVM started (jar resolution and
        formatting come on top on the first call). Must be > 0.

    Returns
    -------
    str
        The bootstrap address, ``"127.0.0.1:9092"`` unless ``PREFSTREAM_KAFKA_PORT`` is set
        (same as :func:`local_bootstrap`).

    Raises
    ------
    InvalidParameterError
        If ``timeout`` is not positive.
    BrokerError
        If Java/Maven are missing, the port is taken by something else, or the broker does not
        answer in time; the message carries the script's output and the broker log tail.
    """
    if not (isinstance(timeout, (int, float)) and timeout > 0):
        raise InvalidParameterError(
            f"The 'timeout' parameter of start_broker must be a number of seconds > 0. "
            f"Got {timeout!r} instead."
        )
    script = _script("start.sh")
    proc = subprocess.run(
        ["bash", str(script), "--timeout", str(int(max(1, round(timeout))))],
        capture_output=True,
        text=True,
        timeout=timeout + 600,  # jar resolution on a cold cache comes on top
    )
    if proc.returncode != 0:
        raise BrokerError(
            f"deploy/kafka/start.sh failed with exit code {proc.returncode}.\n"
            f"{proc.stderr[-4000:]}\nFix the cause above, or run `bash {script}` by hand."
        )
    lines = proc.stdout.strip().splitlines()
    bootstrap = lines[-1].strip() if lines else local_bootstrap()
    wait_for_broker(bootstrap, timeout=min(timeout, 30))
    return bootstrap


def stop_broker(timeout: float = 60) -> None:
    """Stop the local broker (SIGTERM, SIGKILL after ``PREFSTREAM_KAFKA_STOP_TIMEOUT`` = 30 s).

    A no-op when it is not running.

    Raises
    ------
    BrokerError
        If ``deploy/kafka/stop.sh`` fails.
    """
    proc = subprocess.run(
        ["bash", str(_script("stop.sh"))], capture_output=True, text=True, timeout=timeout
    )
    if proc.returncode != 0:
        raise BrokerError(
            f"deploy/kafka/stop.sh failed with exit code {proc.returncode}:\n{proc.stderr[-4000:]}"
        )


def broker_status(probe: bool = True) -> dict[str, Any]:
    """State of the local broker.

    Parameters
    ----------
    probe : bool
        Also ask the broker over the Kafka protocol (kafka-python ``describe_cluster``, 3 s
        budget) whether it answers.

    Returns
    -------
    dict
        ``running`` (bool: our pid alive and the port open), ``pid`` (int or None),
        ``port_open``, ``bootstrap``, ``version`` (Apache Kafka version), ``home``, ``libs``,
        ``jars_resolved``, ``data_dir``, ``formatted``, ``log_file``; with ``probe`` also
        ``answers`` (bool) and ``cluster_id`` (str or None).
    """
    proc = subprocess.run(
        ["bash", str(_script("status.sh")), "--json"], capture_output=True, text=True, timeout=30
    )
    try:
        status = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError) as exc:
        raise BrokerError(
            f"deploy/kafka/status.sh printed no JSON (exit {proc.returncode}): "
            f"{proc.stdout!r} {proc.stderr[-2000:]!r}"
        ) from exc
    if probe:
        status["answers"] = False
        status["cluster_id"] = None
        if status.get("port_open"):
            try:
                info = wait_for_broker(status["bootstrap"], timeout=3)
                status["answers"] = True
                status["cluster_id"] = info.get("cluster_id")
            except BrokerError:
                pass
    return status


def wait_for_broker(
    bootstrap: str | None = None,
    timeout: float = 30,
    client_options: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Poll until a broker answers ``describe_cluster``; return the cluster description.

    Parameters
    ----------
    bootstrap : str or None
        ``host:port[,host:port...]``; ``None`` takes it from ``client_options`` or
        :func:`local_bootstrap`.
    timeout : float
        Seconds to keep trying.
    client_options : Mapping or None
        Extra kafka-python options (see :func:`kafka_client_options`).

    Returns
    -------
    dict
        kafka-python's ``describe_cluster()`` answer (``cluster_id``, ``controller_id``,
        ``brokers``).

    Raises
    ------
    BrokerError
        If no broker answered within ``timeout`` seconds (message gives the last error), or, at
        once, when a secured connection is refused by TLS (certificate verify failed) or SASL
        (authentication failed): the message is then that one cause
        (:func:`stream.broker.diagnose.connection_failure`).
    """
    from kafka.admin import KafkaAdminClient
    from kafka.errors import KafkaConfigurationError

    from stream.broker.diagnose import connection_failure

    opts = _client_options(bootstrap, client_options)
    if str(opts.get("security_protocol") or "PLAINTEXT").upper() != "PLAINTEXT":
        cause = connection_failure(opts, timeout=max(0.5, min(timeout, 5.0)))
        if cause is not None:  # a wrong CA or password: retrying for `timeout` s cannot help
            raise BrokerError(cause)
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while True:
        remaining = deadline - time.monotonic()
        admin = None
        try:
            budget_ms = int(max(500, min(5000, remaining * 1000)))
            admin = KafkaAdminClient(
                client_id="prefstream-probe",
                request_timeout_ms=budget_ms,
                bootstrap_timeout_ms=budget_ms,
                **opts,
            )
            info = admin.describe_cluster()
            if info.get("brokers"):
                return info
            last = BrokerError("cluster answered but reports no broker yet")
        except (KafkaConfigurationError, TypeError) as exc:  # retrying cannot help
            raise BrokerError(f"Invalid Kafka client options {sorted(opts)}: {exc}") from exc
        except Exception as exc:  # kafka-python raises many types while a broker boots
            last = exc
        finally:
            if admin is not None:
                try:
                    admin.close()
                except Exception:
                    pass
        if time.monotonic() >= deadline:
            break
        time.sleep(0.25)
    servers = opts["bootstrap_servers"]
    servers = ",".join(servers) if isinstance(servers, (list, tuple)) else str(servers)
    hint = ("Start the local one with `prefstream broker start` (or `make broker-start`), or set "
            "PREFSTREAM_BOOTSTRAP to a reachable cluster." if servers == local_bootstrap() else
            "Check that this cluster is up and reachable from here and that PREFSTREAM_BOOTSTRAP "
            "and PREFSTREAM_SECURITY_PROTOCOL name one of its listeners.")
    raise BrokerError(f"No Kafka broker answered at {servers} within {timeout:g} s (last error: {last!r}). {hint}")


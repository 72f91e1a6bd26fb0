"""Shared pytest fixtures for prefstream.

Fixtures
--------
repo_root : pathlib.Path (session)
    The checkout's root directory.
data_dir : pathlib.Path (session)
    ``$PREFSTREAM_DATA_DIR`` or ``<repo>/../shared/data``: the real data sets that are not bundled
    in the repository. When that folder is missing the test SKIPS with a reason naming
    ``PREFSTREAM_DATA_DIR`` (a fresh clone passes; ``.ci/run`` sets the variable and checks the
    folder, so CI runs them all). Tests that need one data set use :func:`needs_data`.
kafka_bootstrap : str (session)
    Bootstrap address of a Kafka broker that answers: ``$PREFSTREAM_BOOTSTRAP`` or
    ``127.0.0.1:${PREFSTREAM_KAFKA_PORT:-9092}``. Under ``CI=true`` an unreachable broker FAILS the tests that use it
    (.ci/run starts the broker first). Locally, when the default local broker is not running,
    it is started with :func:`stream.broker.start_broker` and left running (``make
    broker-stop`` stops it; ``make test`` starts/stops it around the run itself). Tests using it are marked ``kafka`` automatically (``-m "not kafka"`` skips them).
kafka_options : dict (session)
    kafka-python keyword arguments for that broker (bootstrap + ``PREFSTREAM_*`` security
    options): ``KafkaProducer(**kafka_options)``.
skip_or_fail(msg), require_module(name) : functions
    A missing tool or pinned package skips locally and FAILS under ``CI=true``.
schema_registry_url : str (session)
    The Confluent-compatible API of a schema registry that answers: ``$PREFSTREAM_SCHEMA_REGISTRY_URL``
    or ``http://127.0.0.1:${PREFSTREAM_REGISTRY_PORT:-8081}/apis/ccompat/v7`` (deploy/registry/start.sh).
    Locally the test SKIPS when none answers (naming ``make registry-start``); under ``CI=true`` it
    FAILS (.ci/run starts the registry first). Tests using it are marked ``kafka`` and ``registry``.
unique_topic : callable (function)
    ``unique_topic(prefix="t", partitions=1, config=None) -> str`` creates a fresh topic whose
    name no other test uses, waits until it has a leader, and deletes it after the test.
"""

from __future__ import annotations

import os
import re
import uuid
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
_KAFKA_FIXTURES = {"kafka_bootstrap", "kafka_options", "unique_topic", "schema_registry_url"}


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def pytest_configure(config):
    # kafka-python loads its protocol schemas with importlib.resources' legacy API: one
    # DeprecationWarning per schema, hundreds per session, none of them ours.
    config.addinivalue_line("filterwarnings", "ignore:read_text is deprecated:DeprecationWarning")
    config.addinivalue_line("filterwarnings", "ignore:open_text is deprecated:DeprecationWarning")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if _KAFKA_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.kafka)
        if "schema_registry_url" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.registry)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


def skip_or_fail(msg: str) -> None:
    """Skip with ``msg`` locally; under ``CI=true`` FAIL instead (.ci/run installs every tool and
    pinned package, so a missing one there is a broken CI, not a reason to skip)."""
    if _truthy(os.environ.get("CI")):
        pytest.fail(msg + " (CI=true: .ci/run provides it, so this must not skip)", pytrace=False)
    pytest.skip(msg)


def require_module(name: str, why: str = "a pinned dependency in requirements.txt"):
    """``pytest.importorskip`` that fails under ``CI=true`` (see :func:`skip_or_fail`)."""
    import importlib

    try:
        return importlib.import_module(name)
    except ImportError as exc:
        skip_or_fail(f"cannot import {name!r} ({why}): {exc}")


def data_root() -> Path:
    """Where the non-bundled data sets live: ``$PREFSTREAM_DATA_DIR`` or ``<repo>/../shared/data``."""
    env = os.environ.get("PREFSTREAM_DATA_DIR")
    return Path(env).resolve() if env else (REPO_ROOT / ".." / "shared" / "data").resolve()


def _missing_data_reason(sub: str | None = None) -> str | None:
    root = data_root()
    path = root / sub if sub else root
    if path.is_dir():
        return None
    how = ("PREFSTREAM_DATA_DIR" + (f"={os.environ['PREFSTREAM_DATA_DIR']}" if os.environ.get("PREFSTREAM_DATA_DIR")
                                    else " is unset and ../shared/data is absent"))
    return f"data set folder {path} not found ({how}); set PREFSTREAM_DATA_DIR to the folder holding the data sets"


def needs_data(sub: str):
    """``@needs_data("pokemon")``: skip unless ``<data_root()>/<sub>`` exists (the reason names PREFSTREAM_DATA_DIR)."""
    reason = _missing_data_reason(sub)
    return pytest.mark.skipif(reason is not None, reason=reason or "")


@pytest.fixture(scope="session")
def data_dir() -> Path:
    reason = _missing_data_reason()
    if reason is not None:
        pytest.skip(reason)
    return data_root()


@pytest.fixture(scope="session")
def kafka_bootstrap() -> str:
    from stream.broker import BrokerError, kafka_client_options, local_bootstrap, wait_for_broker

    opts = kafka_client_options()  # PREFSTREAM_* variables; bootstrap defaults to 127.0.0.1:9092
    bootstrap = opts["bootstrap_servers"]
    unreachable: BrokerError | None = None
    try:
        wait_for_broker(bootstrap, timeout=5, client_options=opts)
    except BrokerError as exc:
        unreachable = exc
    if unreachable is None:
        yield bootstrap
        return
    if _truthy(os.environ.get("CI")):
        pytest.fail(
            f"Kafka broker at {bootstrap} is not reachable under CI=true: {unreachable}\n"
            ".ci/run must start it first (deploy/kafka/start.sh); see "
            f"{os.environ.get('PREFSTREAM_CACHE', '~/.cache/prefstream')}/kafka/*/run/kafka.log",
            pytrace=False,
        )
    if bootstrap != local_bootstrap():
        pytest.fail(
            f"PREFSTREAM_BOOTSTRAP={bootstrap} does not answer: {unreachable}. Start that cluster, "
            "or unset PREFSTREAM_BOOTSTRAP to use the local broker.",
            pytrace=False,
        )
    from stream.broker import start_broker

    # Started here, it is left running afterwards: on a shared machine another pytest session
    # may be using it by then (stop it with `make broker-stop`; `make test` starts and stops
    # it around the run by itself).
    try:
        bootstrap = start_broker(timeout=120)
    except BrokerError as exc:
        pytest.fail(f"could not start the local Kafka broker: {exc}", pytrace=False)
    yield bootstrap


def registry_url() -> str:
    """``$PREFSTREAM_SCHEMA_REGISTRY_URL`` or the local registry's URL (deploy/registry/env.sh)."""
    return os.environ.get("PREFSTREAM_SCHEMA_REGISTRY_URL") or (
        f"http://127.0.0.1:{os.environ.get('PREFSTREAM_REGISTRY_PORT', '8081')}/apis/ccompat/v7")


@pytest.fixture(scope="session")
def schema_registry_url() -> str:
    import urllib.request

    url = registry_url()
    try:
        with urllib.request.urlopen(url + "/subjects", timeout=5) as resp:
            resp.read()
    except Exception as exc:  # noqa: BLE001 - any failure means "no registry here"
        msg = (f"no schema registry answers at {url} ({exc!r}); start one with `make registry-start` "
               "(deploy/registry/start.sh) or set PREFSTREAM_SCHEMA_REGISTRY_URL")
        if _truthy(os.environ.get("CI")):
            pytest.fail(msg + " (CI=true: .ci/run starts it, so this must not skip)", pytrace=False)
        pytest.skip(msg)
    return url


@pytest.fixture(scope="session")
def kafka_options(kafka_bootstrap) -> dict:
    from stream.broker import kafka_client_options

    opts = kafka_client_options()
    opts["bootstrap_servers"] = kafka_bootstrap
    return opts


@pytest.fixture
def unique_topic(kafka_options, request):
    from stream.broker import create_topics

    created: list[str] = []
    test_part = re.sub(r"[^A-Za-z0-9]+", "-", request.node.name)[:60].strip("-")

    def make(prefix: str = "t", partitions: int = 1, config: dict | None = None) -> str:
        clean = re.sub(r"[^A-Za-z0-9._-]+", "-", prefix)[:60] or "t"
        name = f"test.{clean}.{test_part}.{uuid.uuid4().hex[:10]}"
        from stream.broker import TopicSpec

        status = create_topics(
            None,
            {name: TopicSpec(partitions, dict(config or {}))},
            client_options=kafka_options,
        )
        if status[name] != "created":
            pytest.fail(f"topic {name} already existed ({status}); unique names must not collide")
        created.append(name)
        return name

    yield make

    if created:
        from kafka.admin import KafkaAdminClient

        try:
            admin = KafkaAdminClient(client_id="prefstream-test-cleanup", **kafka_options)
            try:
                admin.delete_topics(created)
            finally:
                admin.close()
        except Exception:  # cleanup is best effort; the topics are uniquely named anyway
            pass


@pytest.fixture(autouse=True, scope="session")
def builtin_models():
    """The built-in models and explainers, registered as every entry point does (``stream.load_builtins``)."""
    from stream.models import register_all

    register_all()


@pytest.fixture(autouse=True, scope="module")
def _registry_restored_after_each_module():
    """Models and explainers a test module registers (throw-away ones: a crashing model, a failing
    explainer) are gone after it: the registry is global, and tests that iterate it must not see
    another module's leftovers (order-dependent failures before)."""
    from stream import registry
    from stream.models import register_all

    register_all()  # the built-ins stay: register_all registers only once per process
    models = dict(registry._MODELS)  # noqa: SLF001 - the test suite's own bookkeeping
    explainers = {m: dict(fns) for m, fns in registry._EXPLAINERS.items()}  # noqa: SLF001
    yield
    with registry._LOCK:  # noqa: SLF001
        registry._MODELS.clear()
        registry._MODELS.update(models)
        registry._EXPLAINERS.clear()
        registry._EXPLAINERS.update(explainers)

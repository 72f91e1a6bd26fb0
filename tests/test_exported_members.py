"""The public surface of the three packages (as httpx's tests/test_exported_members.py checks its own).

Each of ``stream``, ``learners`` and ``explainers`` lists its public names in a sorted ``__all__``;
every listed name resolves to an object defined in prefstream; every public non-module name the
package holds is listed; ``import`` of a package loads no heavy dependency; the error tree is one.
"""

from __future__ import annotations

import importlib
import inspect
import json
import subprocess
import sys
import types

import pytest

PACKAGES = ("stream", "learners", "explainers")
HEAVY = ("torch", "matplotlib", "kafka", "faust", "sklearn")


@pytest.mark.parametrize("name", PACKAGES)
def test_all_is_sorted_unique_and_resolves_to_prefstream_objects(name):
    pkg = importlib.import_module(name)
    exported = list(pkg.__all__)
    assert exported == sorted(exported), "keep __all__ sorted"
    assert len(set(exported)) == len(exported)
    for member in exported:
        obj = getattr(pkg, member)
        assert not isinstance(obj, types.ModuleType), f"{name}.{member} is a module; export what it defines"
        module = getattr(obj, "__module__", "") or ""
        assert module.split(".")[0] in PACKAGES, f"{name}.{member} comes from {module!r}, not from prefstream"


@pytest.mark.parametrize("name", PACKAGES)
def test_every_public_member_is_exported(name):
    pkg = importlib.import_module(name)
    for member in pkg.__all__:  # resolve the lazy names first
        getattr(pkg, member)
    public = {m for m in dir(pkg) if not m.startswith("_") and not isinstance(getattr(pkg, m), types.ModuleType)}
    assert public <= set(pkg.__all__), f"public but not in __all__: {sorted(public - set(pkg.__all__))}"


def test_unknown_attribute_is_an_attribute_error():
    import learners

    with pytest.raises(AttributeError, match="has no attribute 'NoSuchLearner'"):
        learners.NoSuchLearner  # noqa: B018


def test_explanation_is_public():
    from explainers import Explanation
    from explainers._result import Explanation as Impl

    assert Explanation is Impl


def test_one_error_tree_importable_from_stream():
    import explainers
    import learners
    import stream
    from learners import exceptions as ex

    for cls in (ex.PrefstreamError, ex.InvalidInputError, ex.InvalidParameterError, ex.NotFittedError,
                ex.SnapshotError, ex.BudgetError):
        assert getattr(stream, cls.__name__) is cls
        assert getattr(learners, cls.__name__) is cls
        assert getattr(explainers, cls.__name__) is cls
    errors = [getattr(stream, n) for n in stream.__all__ if inspect.isclass(getattr(stream, n))
              and issubclass(getattr(stream, n), BaseException)]
    assert {e.__name__ for e in errors} >= {"BrokerError", "BrokerUnavailable", "DeadLetter", "DemoError"}
    for e in errors:
        assert issubclass(e, stream.PrefstreamError), e
    # the tree drawn in the docstring names every error the package exports
    for e in errors:
        assert e.__name__ in stream.__doc__, e.__name__


@pytest.mark.parametrize("name", PACKAGES)
def test_import_is_light(name):
    code = f"import sys, json, {name}; print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []

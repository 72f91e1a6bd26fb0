"""Built-in registration: one module registers, the registry imports it never, a user's model is never replaced.

Run in fresh interpreters (the suite's own registry already holds the built-ins).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest


def _run(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_the_registry_knows_no_model_and_imports_no_builtin():
    out = _run("""
        import sys
        from stream import registry
        print(registry.models(), "stream.models" in sys.modules, "stream.plugins" in sys.modules)
    """)
    assert out == "[] False False"


def test_loading_the_builtins_never_replaces_a_users_model():
    out = _run("""
        import stream
        from learners.exceptions import InvalidParameterError
        from learners.linear import LinearBT
        from stream import registry

        mine = lambda settings, params: LinearBT(["a"])
        registry.register_model("capacity", mine, LinearBT.from_state)
        try:
            stream.load_builtins()
            print("replaced")
        except InvalidParameterError as exc:
            print("refused:", "already registered and is not the built-in one" in str(exc))
        print(registry.get_model("capacity").factory is mine)
    """)
    assert out.splitlines() == ["refused: True", "True"]


def test_an_explicit_replace_after_the_builtins_stays():
    out = _run("""
        import stream
        from learners.linear import LinearBT
        from stream import registry

        stream.load_builtins()
        mine = lambda settings, params: LinearBT(["a"])
        registry.register_model("capacity", mine, LinearBT.from_state, replace=True)
        stream.load_builtins()   # idempotent: the explicit replacement stays
        print(registry.get_model("capacity").factory is mine, sorted(registry.models()))
    """)
    assert out == "True ['capacity', 'capacity-personal', 'cgpm', 'gpm', 'linear-bt', 'linear-bt-personal']"


def _capacity(constraints=(), seed=0, n=40):
    from learners.capacity import CapacityRDA

    m = CapacityRDA(["x", "y", "z"], scaler="none", constraints=list(constraints))
    rng = np.random.default_rng(seed)
    for _ in range(n):
        a, b = rng.random(3), rng.random(3)
        m.learn_one(dict(zip("xyz", a)), dict(zip("xyz", b)), 1 if a.sum() > b.sum() else -1)
    return m


def test_capacity_merge_rule_pools_rda_and_keeps_the_largest_admm_part():
    from stream import registry

    a, b = _capacity(seed=1), _capacity(seed=2, n=25)
    pooled = registry.merge_learners("capacity", [(a, 40), (b, 25)])
    np.testing.assert_allclose(pooled.mobius, (a + b).mobius, rtol=0, atol=0)
    assert pooled is not a and pooled is not b
    c, d = _capacity(["monotone"], seed=3, n=30), _capacity(["monotone"], seed=4, n=10)
    assert registry.merge_learners("capacity", [(d, 10), (c, 30)]) is c  # not averaged: ADMM-RDA parts cannot be pooled
    from learners.exceptions import InvalidParameterError

    with pytest.raises(InvalidParameterError, match="ADMM-RDA"):
        c + d  # what the rule is about: ADMM-RDA refuses +=

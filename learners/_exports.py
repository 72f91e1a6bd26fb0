"""Lazy public names for a package ``__init__`` (PEP 562), so that ``import learners`` (or
``explainers``, ``stream``) stays light: a name is imported from its module on first use, and
heavy dependencies (torch, matplotlib, Kafka clients) only load when a name that needs them is used.

Examples
--------
>>> __getattr__, __dir__ = lazy_exports("pkg", {"sqrt": "math"}, ["sqrt"])
>>> __getattr__("sqrt")(9.0)
3.0
>>> __getattr__("cbrt")
Traceback (most recent call last):
...
AttributeError: module 'pkg' has no attribute 'cbrt'
"""

from __future__ import annotations

import importlib
from typing import Callable, Iterable, Mapping

__all__ = ["lazy_exports"]


def lazy_exports(package: str, where: Mapping[str, str], public: Iterable[str]) -> tuple[Callable, Callable]:
    """Module-level ``__getattr__`` and ``__dir__`` resolving ``name`` from module ``where[name]``.

    Parameters
    ----------
    package : str
        The package's ``__name__`` (for the AttributeError message).
    where : mapping of str to str
        Public name → the module that defines it.
    public : iterable of str
        The package's ``__all__`` (listed by ``dir()`` with the package's own globals).
    """
    public = list(public)

    def __getattr__(name: str):
        try:
            module = where[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        return getattr(importlib.import_module(module), name)

    def __dir__() -> list[str]:
        import sys

        return sorted(set(vars(sys.modules[package])) | set(public))

    return __getattr__, __dir__

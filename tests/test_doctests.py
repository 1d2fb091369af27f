"""Every module's doctests run (examples in docstrings stay true), found by walking the package: a module that no
longer imports fails here too. The packages whose style promises examples (ledger, rewards, tools) must have some.

    pytest -q tests/test_doctests.py
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import omnidecision

MODULES = sorted(m.name for m in pkgutil.walk_packages(omnidecision.__path__, "omnidecision."))
WITH_EXAMPLES = ("omnidecision.ledger", "omnidecision.rewards", "omnidecision.tools", "omnidecision.tasks")


@pytest.mark.parametrize("name", MODULES)
def test_module_doctests(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, report=False)
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} doctest examples failed (run with -s)"


@pytest.mark.parametrize("package", WITH_EXAMPLES)
def test_packages_that_promise_examples_have_them(package: str) -> None:
    finder = doctest.DocTestFinder()
    names = [n for n in MODULES if n == package or n.startswith(package + ".")]
    examples = sum(len(t.examples) for n in names for t in finder.find(importlib.import_module(n)))
    assert examples > 0, f"{package}: no doctest examples"

"""The tools modules' doctests (examples in docstrings stay true)."""

from __future__ import annotations

import doctest

import pytest

from omnidecision.tools import clips, registry, search, text


@pytest.mark.parametrize("module", [text, search, registry, clips], ids=lambda m: m.__name__)
def test_doctests(module):
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0

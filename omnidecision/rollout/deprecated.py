"""Old public names of the rollout engine (collect's vocabulary, before the engine had its own), kept one release
as deprecated aliases: reading one warns once (`DeprecationWarning`, naming the new name) and returns the new object.
Listed in CHANGELOG.md, "Deprecated".

    >>> from omnidecision.rollout import runner
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     assert runner.CollectSummary is runner.RolloutSummary
    >>> str(caught[0].message)
    'omnidecision.rollout.runner.CollectSummary is deprecated, use RolloutSummary (CHANGELOG.md)'
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from typing import Any


def aliases(module: str, old_to_new: Mapping[str, str], namespace: dict[str, Any]) -> Callable[[str], Any]:
    """A module `__getattr__` (PEP 562) that serves each old name of `old_to_new` as its new one, with a warning. A
    new name `package.module:name` is another module's, imported when first read (the mover imports its old home:
    an import at the top would be a circle)."""

    def __getattr__(name: str) -> Any:
        if name in old_to_new:
            new = old_to_new[name]
            warnings.warn(f"{module}.{name} is deprecated, use {new.replace(':', '.')} (CHANGELOG.md)",
                          DeprecationWarning, stacklevel=2)
            if ":" in new and new not in namespace:
                where, _, attr = new.partition(":")
                return getattr(importlib.import_module(where), attr)
            return namespace[new]
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__

"""One small registry for everything the project looks up by name (tools, backend kinds, task formats).

A name is registered once, next to its code, with the registry's decorator; lists elsewhere are derived from the
registry. The registry is a mapping; `registry[name]` with an unknown name raises `UnknownName` (a KeyError)
listing the registered ones. A registry built with `package=` imports every module of that package the first time
it is read, so adding an entry is one new module (no list to edit) and importing the registry stays cheap until a
name is looked up.

    >>> colours = Registry("colour")
    >>> @colours.register("red")
    ... def red() -> str:
    ...     return "#f00"
    >>> colours["red"](), list(colours), colours.get("blue")
    ('#f00', ['red'], None)
    >>> colours["blue"]
    Traceback (most recent call last):
    ...
    omnidecision.protocol.registry.UnknownName: unknown colour 'blue'; registered: red
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterator, MutableMapping
from typing import TypeVar

T = TypeVar("T")


class UnknownName(KeyError, ValueError):
    """A name that is not registered. A `KeyError` for lookups and a `ValueError` for recipe validation (pydantic
    turns a ValueError raised in a validator into a field error)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


def _origin(obj: object) -> str:
    """module.qualname of a class or function (of an instance: of its class)."""
    target = obj if hasattr(obj, "__qualname__") else type(obj)
    return f"{target.__module__}.{target.__qualname__}"


class Registry(MutableMapping[str, T]):
    """name → object, filled by `@registry.register("name")` where the object is defined. A mapping:
    `registry[name]` raises `UnknownName` listing the registered names, `registry.get(name)` gives None."""

    def __init__(self, what: str, package: str | None = None) -> None:
        self.what = what
        self.package = package
        self._entries: dict[str, T] = {}
        self._discovered = package is None

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator: `@registry.register("name")` on a class or function. A second object under a taken name is
        an error (two modules claiming one name is a bug); the same object again is not (a module reloaded)."""

        def add(obj: T) -> T:
            old = self._entries.get(name)
            if old is not None and old is not obj and _origin(old) != _origin(obj):
                raise ValueError(f"{self.what} {name!r} is registered twice ({_origin(old)} and {_origin(obj)})")
            self._entries[name] = obj
            return obj

        return add

    def registered(self, name: str) -> T | None:
        """What is registered under `name` so far, without importing the package's modules (for a decorator that
        checks a name while those modules load)."""
        return self._entries.get(name)

    def unregister(self, name: str) -> None:
        """Remove a name (tests register toy entries and take them out again)."""
        self._entries.pop(name, None)

    def _discover(self) -> None:
        # Import every module of the package once, so that their decorators have run.
        if self._discovered or self.package is None:
            return
        self._discovered = True  # first: the modules imported below look names up while they load
        try:
            pkg = importlib.import_module(self.package)
            for info in pkgutil.iter_modules(pkg.__path__, self.package + "."):
                if not info.name.rsplit(".", 1)[-1].startswith(("_", "cli")):
                    importlib.import_module(info.name)
        except BaseException:
            self._discovered = False  # a module that failed to import is tried again (and fails loudly) next time
            raise

    def names(self) -> tuple[str, ...]:
        """Registered names in registration order."""
        self._discover()
        return tuple(self._entries)

    def __getitem__(self, name: str) -> T:
        self._discover()
        try:
            return self._entries[name]
        except KeyError:
            # sorted: the registration order depends on which module a process imported first
            known = ", ".join(sorted(self._entries))
            raise UnknownName(f"unknown {self.what} {name!r}; registered: {known}") from None

    def __setitem__(self, name: str, obj: T) -> None:
        self._discover()
        self._entries[name] = obj

    def __delitem__(self, name: str) -> None:
        self._discover()
        del self._entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    def __repr__(self) -> str:
        return f"Registry({self.what!r}: {', '.join(self._entries)})"

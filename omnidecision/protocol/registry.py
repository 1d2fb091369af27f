"""One small registry for everything the project looks up by name (tools, backend kinds, task formats).

A name is registered once, next to its code, with the registry's decorator; lists elsewhere are derived from the
registry. The registry is a mapping; `registry[name]` with an unknown name raises `UnknownName` (a KeyError)
listing the registered ones. A registry built with `package=` imports every module of that package the first time
it is read, so adding an entry is one new module (no list to edit) and importing the registry stays cheap until a
name is looked up. A registry built with `plugins=True` (the tools) then imports the user's own plugin modules too
(`load_plugins`: the modules named in `OMNIDECISION_PLUGINS` and the installed entry points of the group
`omnidecision.plugins`), so an entry of one's own registers with the same decorator from outside the package.

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
import importlib.metadata
import os
import pkgutil
from collections.abc import Callable, Iterator, MutableMapping
from typing import TypeVar

T = TypeVar("T")

# The user's own modules, imported as plugins, the two ways vLLM loads its plugins (the entry-point group
# `vllm.general_plugins`, with a variable to choose among them): a variable naming modules that are only on the
# PYTHONPATH (no packaging, one line in a job script), and the entry points of an installed package (there wherever
# it is installed, nothing to set). Not a recipe field: every process reads them at its first lookup, so the
# driver, accelerate's workers and the reward processes that check a planner's calls see the same names, with no
# field to repeat in each stage's recipe.
PLUGINS_ENV = "OMNIDECISION_PLUGINS"
PLUGINS_GROUP = "omnidecision.plugins"
_called: set[str] = set()  # the "module:function" plugins whose function has run (once per process)
_entry_points_read = False


class UnknownName(KeyError, ValueError):
    """A name that is not registered. A `KeyError` for lookups and a `ValueError` for recipe validation (pydantic
    turns a ValueError raised in a validator into a field error)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class PluginError(ImportError):
    """A plugin module that did not import: the message names where it was named (the variable or the entry
    point), the module and the import error; the first failure is chained as the cause (its traceback is kept)."""


def env_plugins(value: str) -> list[str]:
    """The plugin specs a value of `OMNIDECISION_PLUGINS` names: "module" or "module:function", comma separated.

    >>> env_plugins("my_tools, more.tools:setup,")
    ['my_tools', 'more.tools:setup']
    """
    return [s.strip() for s in value.split(",") if s.strip()]


def plugin_specs() -> list[tuple[str, str]]:
    """(where it is named, spec) for each plugin: the variable's entries in order, then the installed entry points
    of the group (read until they have all loaded once)."""
    specs = [(PLUGINS_ENV, spec) for spec in env_plugins(os.environ.get(PLUGINS_ENV, ""))]
    if not _entry_points_read:
        specs += [(f"entry point {ep.name!r} of group {PLUGINS_GROUP!r}", ep.value)
                  for ep in importlib.metadata.entry_points(group=PLUGINS_GROUP)]
    return specs


def load_plugins() -> None:
    """Import every plugin not imported yet (its decorators register its names); "module:function" also calls
    `function()` once, as vLLM calls a general plugin. Every plugin is tried; those that fail raise one
    `PluginError` naming each (a plugin that failed is tried again at the next call, and fails loudly again)."""
    global _entry_points_read
    failures: list[tuple[str, str, BaseException]] = []
    for where, spec in plugin_specs():
        module, _, function = spec.partition(":")
        try:
            loaded = importlib.import_module(module)  # a module imported already is not run again
            if function and spec not in _called:
                getattr(loaded, function)()
                _called.add(spec)
        except Exception as exc:  # an import error, or any error the plugin's own code raises while it loads
            failures.append((where, spec, exc))
    if not failures:
        _entry_points_read = True
        return
    lines = [f"{where} names {spec!r}, which failed: {type(exc).__name__}: {exc}" for where, spec, exc in failures]
    hint = (f"{PLUGINS_ENV} holds importable module names, comma separated (the folder that holds a module must "
            "be on PYTHONPATH); an entry point names an installed module")
    raise PluginError("a plugin did not load:\n  " + "\n  ".join(lines) + f"\n({hint})") from failures[0][2]


def _origin(obj: object) -> str:
    """module.qualname of a class or function (of an instance: of its class)."""
    target = obj if hasattr(obj, "__qualname__") else type(obj)
    return f"{target.__module__}.{target.__qualname__}"


class Registry(MutableMapping[str, T]):
    """name → object, filled by `@registry.register("name")` where the object is defined. A mapping:
    `registry[name]` raises `UnknownName` listing the registered names, `registry.get(name)` gives None."""

    def __init__(self, what: str, package: str | None = None, *, plugins: bool = False, how_to_add: str = "") -> None:
        self.what = what
        self.package = package
        # Opt-in: a registry read while every command's module loads (the reward checks) would import the user's
        # modules for `--help` too, and a broken one would break every command.
        self.plugins = plugins
        self._entries: dict[str, T] = {}
        self._discovered = package is None
        self.how_to_add = how_to_add  # what an unknown name's error says after the registered names

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

    def registered_names(self) -> tuple[str, ...]:
        """The names registered so far, without importing the package's modules (a lower layer's view: the
        action schema's check of a tool name, which may not import the tools package)."""
        return tuple(self._entries)

    def _discover(self) -> None:
        # Import every module of the package once, then the user's plugins, so that their decorators have run.
        if self._discovered or self.package is None:
            return
        self._discovered = True  # first: the modules imported below look names up while they load
        try:
            pkg = importlib.import_module(self.package)
            for info in pkgutil.iter_modules(pkg.__path__, self.package + "."):
                if not info.name.rsplit(".", 1)[-1].startswith(("_", "cli")):
                    importlib.import_module(info.name)
            if self.plugins:
                load_plugins()
        except BaseException:
            self._discovered = False  # a module that failed to import is tried again (and fails loudly) next time
            raise

    def names(self) -> tuple[str, ...]:
        """Registered names in registration order."""
        self._discover()
        return tuple(self._entries)

    def __getitem__(self, name: str) -> T:
        self._discover()
        if name not in self._entries and self.plugins:
            load_plugins()  # a plugin named since the first lookup (the variable set later in this process)
        try:
            return self._entries[name]
        except KeyError:
            # sorted: the registration order depends on which module a process imported first
            known = ", ".join(sorted(self._entries))
            raise UnknownName(f"unknown {self.what} {name!r}; registered: {known}{self.how_to_add}") from None

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

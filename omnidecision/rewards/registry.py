"""The one reward registry: every name a GRPO recipe's `reward_funcs` may list, registered next to its code.

Three kinds of entry share one name space (`REWARDS`, a `protocol.registry.Registry`):

- **checks** (`@register_check("tool", weight=1.0)` in `rewards/checks.py`): a pure `(decision, ledger) -> [0, 1]`
  function with its default weight in the closure rubric; its TRL reward function is derived (`tool_reward`);
- **rewards** (`@register_reward("closure")`): a factory `(**params) -> reward function`;
- **judges** (`@register_reward("llm_judge", kind="judge")`): a factory of a reward judge.

`CHECKS` and `DEFAULT_WEIGHTS` are live views of the checks in the registry (a check registered later, by a plug-in
or a test, is in them). A name that is not registered but holds a dot is an import path, as TRL's `grpo.py` reads
`reward_funcs`: `my_pkg.my_module.my_reward` imports `my_pkg.my_module` (the working directory on the path) and
takes `my_reward`, a reward function; with parameters it is called with them as a factory.

    >>> [f.__name__ for f in get_reward_funcs(["format", "closure"])]
    ['format_reward', 'closure_reward']
    >>> REWARDS["tool"].kind, DEFAULT_WEIGHTS["finish"]
    ('check', 2.0)
    >>> get_reward_funcs(["omnidecision.rewards.closure.closure_reward"])[0].__name__
    'closure_reward'

Run the doctests: `.venv/bin/pytest --doctest-modules omnidecision/rewards`.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import logging
import math
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from omnidecision.protocol.registry import Registry, UnknownName
from omnidecision.rewards.decision import Decision, ledgers_column

logger = logging.getLogger(__name__)

RewardFunc = Callable[..., list[float | None]]
Check = Callable[..., float]  # (decision: Decision, state: Ledger, **params) -> score in [0, 1]
Kind = Literal["check", "reward", "judge"]


@dataclass(frozen=True)
class RewardEntry:
    """One registered name: its factory `(**params) -> reward function`, its kind, and for a check the check
    function and its default weight in the closure rubric."""

    name: str
    factory: Callable[..., RewardFunc]
    kind: Kind = "reward"
    check: Check | None = None
    weight: float | None = None

    @property
    def origin(self) -> str:
        target = self.check or self.factory
        return f"{target.__module__}.{target.__qualname__}"


# Reading it imports every module of omnidecision.rewards once, so the judges' registrations have run.
REWARDS: Registry[RewardEntry] = Registry("reward", package="omnidecision.rewards")


def add(entry: RewardEntry) -> None:
    """Register one entry (through `register_reward` or `register_check`)."""
    # Checked here rather than by Registry.register: every entry is a RewardEntry, so the origin that tells a module
    # reloaded (same function) from two modules claiming one name is the function's, not the entry's.
    old = REWARDS.registered(entry.name)
    if old is not None and old.origin != entry.origin:
        raise ValueError(f"reward {entry.name!r} is already registered ({old.origin}; now {entry.origin})")
    REWARDS.register(entry.name)(entry)


Factory = Callable[..., RewardFunc]


def register_reward(name: str, kind: Kind = "reward") -> Callable[[Factory], Factory]:
    """Register a reward factory `(**params) -> reward function` under `name` (`kind="judge"` for a reward judge)."""
    if kind == "check":
        raise ValueError("a check is registered with register_check (it needs its weight)")

    def deco(factory: Factory) -> Factory:
        add(RewardEntry(name=name, factory=factory, kind=kind))
        return factory

    return deco


def unregister_reward(name: str) -> None:
    """Remove a name (tests register toy checks and rewards and take them out again)."""
    REWARDS.unregister(name)


def register_check(name: str, weight: float = 1.0) -> Callable[[Check], Check]:
    """Register a closure check in the reward registry (`rewards.registry.REWARDS`) under `name`, with its default
    weight in the closure rubric; its TRL reward function (`<name>_reward`) is derived. Keyword parameters after
    `(decision, state)` are the check's own: a recipe passes them as that reward's parameters.

    >>> from omnidecision.ledger import Ledger
    >>> @register_check("toy_example", weight=0.0)
    ... def toy(decision, state, bonus: float = 1.0):
    ...     return bonus if decision.is_finish else 0.0
    >>> CHECKS["toy_example"] is toy, DEFAULT_WEIGHTS["toy_example"]
    (True, 0.0)
    >>> get_reward_funcs(["toy_example"], toy_example={"bonus": 0.5})[0](['{"action": "finish"}'],
    ...                                                                  ledger=[Ledger().model_dump_json()])
    [0.5]
    >>> unregister_check("toy_example")
    """
    if not math.isfinite(weight) or weight < 0:
        raise ValueError(f"check {name!r}: weight must be finite and >= 0, got {weight}")

    def deco(func: Check) -> Check:
        add(RewardEntry(name=name, factory=functools.partial(check_reward, name, func), kind="check", check=func,
                        weight=float(weight)))
        return func

    return deco


def unregister_check(name: str) -> None:
    """Remove a check (tests register toy checks and take them out again)."""
    unregister_reward(name)


def check_reward(name: str, check: Check, **params: Any) -> RewardFunc:
    """One closure check as a TRL reward function, its parameters bound: `check(decision, state, **params)`."""
    bind_params(name, check, params, skip=2)

    def reward(completions: Sequence[object], **kwargs: Any) -> list[float | None]:
        states = ledgers_column(kwargs, len(completions))
        return [check(Decision.parse(c), s, **params) for c, s in zip(completions, states, strict=True)]

    reward.__name__ = f"{name}_reward"
    # the summary only: the check's doctests run once, in checks.py, where their names live
    reward.__doc__ = (check.__doc__ or "").split("\n\n")[0]
    return reward


def get_check_reward(name: str, **params: Any) -> RewardFunc:
    """A registered closure check as a TRL reward function, by name, with its parameters (see `CHECKS`)."""
    return check_reward(name, CHECKS[name], **params)


class _ChecksView(Mapping[str, Any]):
    """name -> check function (or default weight) of every registered check, read from the registry each time."""

    def __init__(self, field: str) -> None:
        self.field = field

    def _checks(self) -> dict[str, RewardEntry]:
        return {name: e for name, e in ((n, REWARDS[n]) for n in REWARDS.names()) if e.kind == "check"}

    def __getitem__(self, name: str) -> Any:
        entry = self._checks().get(name)
        if entry is None:
            raise UnknownName(f"unknown closure check {name!r}; registered: {', '.join(sorted(self._checks()))}")
        return getattr(entry, self.field)

    def __iter__(self) -> Iterator[str]:
        return iter(self._checks())

    def __len__(self) -> int:
        return len(self._checks())

    def __repr__(self) -> str:
        return f"{dict(self)}"


CHECKS: Mapping[str, Check] = _ChecksView("check")
# Weights of the combined closure reward (the rubric and the held-out evaluation use them by default).
DEFAULT_WEIGHTS: Mapping[str, float] = _ChecksView("weight")


def bind_params(name: str, func: Callable[..., Any], params: Mapping[str, Any], skip: int = 0) -> None:
    """Raise ValueError naming the reward and what it takes when `params` do not fit `func` (its first `skip`
    positional parameters are supplied by the caller)."""
    sig = inspect.signature(func)
    try:
        sig.bind(*([None] * skip), **params)
    except TypeError as exc:
        takes = [p for i, p in enumerate(sig.parameters) if i >= skip]
        raise ValueError(f"reward {name!r}: parameters {sorted(params)} do not fit ({exc}); it takes "
                         f"{takes or 'no parameters'}") from None


def import_reward(path: str, **params: Any) -> RewardFunc:
    """`pkg.module.attr`, imported as TRL's grpo.py does (the working directory first on the path): the reward
    function itself, or, given parameters, the factory called with them."""
    module_path, _, attr = path.rpartition(".")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_path)
    except ImportError as exc:
        raise ValueError(f"reward {path!r}: not registered, and module {module_path!r} does not import: {exc}; "
                         f"registered: {', '.join(sorted(REWARDS))}") from exc
    func = getattr(module, attr, None)
    if not callable(func):
        raise ValueError(f"reward {path!r}: module {module_path!r} has no function {attr!r}")
    if params:
        bind_params(path, func, params)
        return func(**params)
    return func


def is_known(name: str) -> bool:
    """A registered name or an import path (whether the path imports is checked when the reward is built)."""
    return name in REWARDS or "." in name


def reward_problems(names: Sequence[str]) -> list[str]:
    """What is wrong with a recipe's reward names, building nothing: an unknown name, an import path that does not
    import (the dry run's check)."""
    problems = []
    for name in names:
        if name in REWARDS:
            continue
        if "." not in name:
            problems.append(f"unknown reward {name!r}; registered: {', '.join(sorted(REWARDS))} "
                            "(or an import path, pkg.module.function)")
            continue
        try:
            import_reward(name)
        except ValueError as exc:
            problems.append(str(exc))
    return problems


def get_reward(name: str, **params: Any) -> RewardFunc:
    """The reward function of a registered name (its factory called with `params`), or of an import path."""
    entry = REWARDS.get(name)
    if entry is not None:
        if entry.kind != "check":  # a check's factory binds its parameters itself, against the check
            bind_params(name, entry.factory, params)
        return entry.factory(**params)
    if "." in name:
        return import_reward(name, **params)
    raise UnknownName(f"unknown reward {name!r}; registered: {', '.join(sorted(REWARDS))} "
                      "(or an import path, pkg.module.function)")


def get_reward_funcs(names: Sequence[str], **params: Mapping[str, Any] | None) -> list[RewardFunc]:
    """Reward functions by name; `params[name]` holds the keyword arguments of that name's factory (a check's: its
    own parameters).

    >>> get_reward_funcs(["nope"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    omnidecision.protocol.registry.UnknownName: unknown reward 'nope'; registered: budget, closure, conflict, ...
    """
    unknown_params = sorted(set(params) - set(names))
    if unknown_params:
        raise ValueError(f"reward params given for {unknown_params}, which are not in reward_funcs {list(names)}")
    return [get_reward(name, **(params.get(name) or {})) for name in names]

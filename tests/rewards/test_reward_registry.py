"""The one reward registry (omnidecision/rewards/registry.py): parameters reach a check through it, a reward named
by import path resolves as TRL's grpo.py resolves it, and GRPO's reward list (recipe → `get_reward_funcs`, and the
dry run's check) reads the same registry.

    .venv/bin/pytest tests/rewards/test_reward_registry.py -q
"""

from __future__ import annotations

from pathlib import Path

import pytest

from omnidecision.rewards import (
    CHECKS,
    DEFAULT_WEIGHTS,
    REWARDS,
    get_check_reward,
    get_reward_funcs,
    register_check,
    register_reward,
    unregister_check,
    unregister_reward,
)
from omnidecision.rewards.closure import EXAMPLE_LEDGER

ROOT = Path(__file__).resolve().parents[2]
FINISH, CALL = '{"action": "finish"}', '{"action": "call", "need": 0}'


def toy_module_reward(completions, **kwargs) -> list[float | None]:
    """A reward defined in a test module, named by its import path in a recipe."""
    return [float(len(str(c))) for c in completions]


def toy_module_factory(scale: float = 1.0):
    """With parameters, an import path names a factory."""

    def scaled(completions, **kwargs) -> list[float | None]:
        return [scale] * len(completions)

    return scaled


@pytest.fixture
def toy_check():
    @register_check("toy_finish_bonus", weight=0.5)
    def toy(decision, state, bonus: float = 1.0, penalty: float = 0.0) -> float:
        return bonus if decision.is_finish else penalty

    yield toy
    unregister_check("toy_finish_bonus")


def test_parameters_reach_a_check_through_the_registry(toy_check):
    assert CHECKS["toy_finish_bonus"] is toy_check and DEFAULT_WEIGHTS["toy_finish_bonus"] == 0.5
    assert REWARDS["toy_finish_bonus"].kind == "check"
    (plain,) = get_reward_funcs(["toy_finish_bonus"])
    (tuned,) = get_reward_funcs(["toy_finish_bonus"], toy_finish_bonus={"bonus": 0.25, "penalty": 0.75})
    ledgers = [EXAMPLE_LEDGER] * 2
    assert plain([FINISH, CALL], ledger=ledgers) == [1.0, 0.0]
    assert tuned([FINISH, CALL], ledger=ledgers) == [0.25, 0.75]
    assert get_check_reward("toy_finish_bonus", bonus=0.5)([FINISH], ledger=ledgers[:1]) == [0.5]
    # a parameter the check does not take is a clear error naming the reward and what it takes, not a TypeError
    with pytest.raises(ValueError, match=r"reward 'toy_finish_bonus'.*\['bogus'\].*takes \['bonus', 'penalty'\]"):
        get_reward_funcs(["toy_finish_bonus"], toy_finish_bonus={"bogus": 1})


def test_a_shipped_check_without_parameters_says_so():
    with pytest.raises(ValueError, match="reward 'format'.*no parameters"):
        get_reward_funcs(["format"], format={"strict": True})


def test_a_registered_factory_gets_its_parameters_and_rejects_others():
    @register_reward("toy_constant")
    def toy_constant(value: float = 0.0):
        return lambda completions, **kw: [value] * len(completions)

    try:
        (f,) = get_reward_funcs(["toy_constant"], toy_constant={"value": 0.3})
        assert f(["a", "b"]) == [0.3, 0.3]
        with pytest.raises(ValueError, match="reward 'toy_constant'.*takes \\['value'\\]"):
            get_reward_funcs(["toy_constant"], toy_constant={"nope": 1})
        with pytest.raises(ValueError, match="already registered"):
            register_reward("toy_constant")(lambda: None)
    finally:
        unregister_reward("toy_constant")
    assert "toy_constant" not in REWARDS


def test_the_judges_are_registered_next_to_their_code():
    assert {name for name in REWARDS if REWARDS[name].kind == "judge"} == {"judge", "llm_judge", "learned_judge"}
    assert REWARDS["llm_judge"].factory.__module__ == "omnidecision.rewards.llm_judge"
    assert REWARDS["learned_judge"].factory.__module__ == "omnidecision.rewards.learned_judge"
    assert set(CHECKS) == {n for n in REWARDS if REWARDS[n].kind == "check"}


def test_a_reward_named_by_import_path_resolves_as_trl_resolves_it():
    path = f"{__name__}.toy_module_reward"
    (f,) = get_reward_funcs([path])
    assert f is toy_module_reward and f(["ab", "abcd"]) == [2.0, 4.0]
    (g,) = get_reward_funcs([f"{__name__}.toy_module_factory"], **{f"{__name__}.toy_module_factory": {"scale": 2}})
    assert g(["x"]) == [2]
    with pytest.raises(ValueError, match="has no function 'missing'"):
        get_reward_funcs([f"{__name__}.missing"])
    with pytest.raises(ValueError, match="module 'no_such_pkg.mod' does not import"):
        get_reward_funcs(["no_such_pkg.mod.reward"])
    with pytest.raises(ValueError, match="unknown reward 'nope'.*import path"):
        get_reward_funcs(["nope"])


@pytest.mark.requires("trl")
def test_grpo_reward_list_resolves_an_import_path(tmp_path):
    """The GRPO recipe's `reward_funcs` (TrlParser) → `get_reward_funcs` with the recipe's params (what rl/train.py
    calls) → the closure reward and the test module's function; the dry run accepts the path and names a bad one."""
    from omnidecision.rl.config import parse_args
    from omnidecision.rl.dryrun import dry_run

    path = f"{__name__}.toy_module_reward"
    args = ["--config", str(ROOT / "configs" / "grpo" / "tiny-cpu.yaml"), "--dataset_name", str(tmp_path / "rl"),
            "--model_name_or_path", str(tmp_path / "model"), "--reward_funcs", "closure", path,
            "--closure_weights", '{"format": 1.0, "finish": 1.0}']
    script, _, _ = parse_args(args)
    assert script.reward_funcs == ["closure", path]
    closure, mine = get_reward_funcs(script.reward_funcs, **script.reward_params())
    assert mine is toy_module_reward
    assert closure.weights == {"format": 1.0, "finish": 1.0}
    assert closure([FINISH], ledger=[EXAMPLE_LEDGER]) == [0.5]  # format 1, finish 0 (need 0 is still open)

    def reward_check(argv: list[str]) -> dict:
        report = dry_run(argv)
        return next(c.model_dump() for c in report.checks if c.what == "reward_funcs")

    assert reward_check(args)["status"] == "ok"
    bad = reward_check(args[:-3] + [f"{__name__}.missing"])
    assert bad["status"] == "error" and "has no function 'missing'" in bad["detail"]

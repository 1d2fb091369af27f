"""The rollout engine speaks its own vocabulary (docs/architecture.md, "Layers"): recipe, runner, summary, options and
stop error are named for rollouts; collect and eval are two users of it, and eval's recipe is not collect's. The old
collect-named API answers for one release, each name with a DeprecationWarning (CHANGELOG.md, "Deprecated")."""

from __future__ import annotations

import importlib
import re
import warnings
from pathlib import Path

import pytest

import omnidecision
from omnidecision.rollout import runner, store
from omnidecision.rollout.recipe import ServeSpec

OLD = re.compile(r"Collect(Recipe|Summary|Options)|CollectionStopped|runner\.collect")
# (module, old name, new name)
RENAMED = [("omnidecision.rollout.recipe", "CollectRecipe", "RolloutRecipe"),
           ("omnidecision.rollout.runner", "collect_runs", "run_tasks"),
           ("omnidecision.rollout.runner", "CollectSummary", "RolloutSummary"),
           ("omnidecision.rollout.options", "CollectOptions", "RolloutOptions"),
           ("omnidecision.rollout.breaker", "CollectionStopped", "RolloutsStopped")]


@pytest.mark.parametrize(("module", "old", "new"), RENAMED)
def test_an_old_name_is_the_new_object_with_a_warning(module: str, old: str, new: str) -> None:
    mod = importlib.import_module(module)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert getattr(mod, old) is getattr(mod, new)
    assert [str(w.message) for w in caught if w.category is DeprecationWarning] == [
        f"{module}.{old} is deprecated, use {new} (CHANGELOG.md)"]
    with pytest.raises(AttributeError):
        getattr(mod, old + "_nope")


# the engine's entry and recipe plumbing, moved out of runner.py to modules of one job each: new home → names
MOVED = {"omnidecision.rollout.engine": ("run_rollouts", "Prepared"),
         "omnidecision.rollout.selection": ("select_tasks", "TaskSelection"),
         "omnidecision.rollout.output": ("one_writer", "out_problems", "write_manifest", "records_file"),
         "omnidecision.rollout.services": ("build_services", "service_problem", "backend_specs")}
MOVES = [("collect", "omnidecision.rollout.engine", "run_rollouts"),
         *((name, home, name) for home, names in MOVED.items() for name in names)]


@pytest.mark.parametrize(("old", "home", "new"), MOVES)
def test_a_moved_name_of_the_runner_is_its_new_home_s_object_with_a_warning(old: str, home: str, new: str) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert getattr(runner, old) is getattr(importlib.import_module(home), new)
    assert [str(w.message) for w in caught if w.category is DeprecationWarning] == [
        f"omnidecision.rollout.runner.{old} is deprecated, use {home}.{new} (CHANGELOG.md)"]


# out of the store, one release: the shard file's name beside the other names of a run's output, the redacting
# writer named for what it adds (old name in rollout.store, new home, new name, the name the warning gives)
STORE = [("shard_path", "omnidecision.rollout.output", "shard_path", "omnidecision.rollout.output.shard_path"),
         ("write_json_atomic", "omnidecision.rollout.store", "write_json_redacted", "write_json_redacted")]


@pytest.mark.parametrize(("old", "home", "new", "said"), STORE)
def test_a_moved_name_of_the_store_is_its_new_object_with_a_warning(old: str, home: str, new: str, said: str
                                                                   ) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert getattr(store, old) is getattr(importlib.import_module(home), new)
    assert [str(w.message) for w in caught if w.category is DeprecationWarning] == [
        f"omnidecision.rollout.store.{old} is deprecated, use {said} (CHANGELOG.md)"]


@pytest.mark.parametrize(("fields", "name"), [({"planner_model": "p", "loras": {"a": "/a"}}, "p"),
                                              ({"loras": {"a": "/a"}, "served_name": "s"}, "a"),
                                              ({"loras": {"a": "/a", "b": "/b"}, "served_name": "s"}, "s"),
                                              ({}, "qwen3-8b")])
def test_the_served_roles_request_the_property_s_name_and_the_old_method_warns(fields: dict, name: str) -> None:
    spec = ServeSpec(model="/ckpt/qwen3-8b", **fields)
    assert spec.requested_model == name
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert spec.request_name() == name
    assert [str(w.message) for w in caught if w.category is DeprecationWarning] == [
        "ServeSpec.request_name() is deprecated, use ServeSpec.requested_model (CHANGELOG.md)"]


def test_collect_and_eval_recipes_are_two_users_of_the_rollout_recipe() -> None:
    from omnidecision.collect.recipe import CollectRecipe
    from omnidecision.rollout.recipe import EvalRecipe, RolloutRecipe

    assert CollectRecipe.__bases__ == (RolloutRecipe,) and EvalRecipe.__bases__ == (RolloutRecipe,)
    assert not issubclass(EvalRecipe, CollectRecipe)
    assert set(CollectRecipe.model_fields) == set(RolloutRecipe.model_fields)


def test_eval_and_the_engine_name_only_the_aliases() -> None:
    """`grep -rE "Collect(Recipe|Summary|Options)|CollectionStopped|runner\\.collect" omnidecision/eval
    omnidecision/rollout` finds only the deprecated aliases (and deprecated.py's doctest of one)."""
    root = Path(omnidecision.__file__).parent
    found = [f"{path.relative_to(root)}:{i}: {line.strip()}"
             for folder in ("eval", "rollout") for path in sorted((root / folder).rglob("*.py"))
             for i, line in enumerate(path.read_text("utf-8").splitlines(), 1)
             if OLD.search(line) and "aliases(" not in line and path.name != "deprecated.py"]
    assert not found, "\n".join(found)

"""The output of a rollout run: the trajectory file it appends to (`records_file`), its lock (`one_writer`), what
refuses a run before its first write (`out_problems`: another process holds the file, the folder holds another
experiment's `manifest.json` (`manifest_problem`), the file is not JSONL), and OUT/manifest.json (`write_manifest`).
The dry run lists `out_problems` as `out` errors; the engine asks them again under the lock, where the answer
still holds, and refuses in the same line.

    omnidecision collect --config configs/collect/synthetic-teacher.yaml --out runs/synth-teacher --dry-run
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from omnidecision.agent.ledger_loop import config_digest
from omnidecision.outputs import OutputBusy, exclusive, write_json_atomic
from omnidecision.protocol.redaction import redact_tree
from omnidecision.provenance import git_revision
from omnidecision.rollout.recipe import RecipeError, RolloutRecipe
from omnidecision.rollout.store import busy_problem, resume_problem


def manifest_identity(recipe: RolloutRecipe) -> dict[str, Any]:
    """What a restart into the same folder must keep (the fields of OUT/manifest.json it compares): the agent
    config's digest and the backends, as written (a header value, a key: ***), so that it compares like with like."""
    return {"config_digest": config_digest(recipe.agent),
            "backends": redact_tree({k: v.model_dump(mode="json") for k, v in sorted(recipe.backends.items())})}


def manifest_problem(recipe: RolloutRecipe) -> str | None:
    """Why a run of `recipe` is refused by the OUT/manifest.json already there: it records another agent config or
    other backends (the records would mix two experiments); names the fields that differ. None when there is no
    manifest, an unreadable one (the run replaces it), or one of this experiment. Writes nothing."""
    path = Path(recipe.out) / "manifest.json"
    if not path.is_file():
        return None
    try:
        old = json.loads(path.read_text("utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    old = old if isinstance(old, dict) else {}
    ours = manifest_identity(recipe)
    differ: list[str] = []
    if old.get("config_digest") not in (None, ours["config_digest"]):
        differ.append(f"agent (config_digest {old['config_digest']} there, {ours['config_digest']} in this recipe)")
    theirs = old.get("backends")
    if theirs not in (None, ours["backends"]):
        theirs = theirs if isinstance(theirs, dict) else {}
        roles = sorted(r for r in {*theirs, *ours["backends"]} if theirs.get(r) != ours["backends"].get(r))
        differ.append(", ".join(f"backends.{r}" for r in roles))
    if not differ:
        return None
    return (f"{Path(recipe.out)}: holds runs of a different agent config or backends ({path} differs in "
            f"{'; '.join(differ)}); collect into a new --out folder")


def write_manifest(recipe: RolloutRecipe, out_dir: Path, n_tasks: int) -> None:
    """OUT/manifest.json: the recipe, the agent config digest, the git revision. Every shard writes the same
    content (shard-specific fields left out; written atomically). A restart with a different agent config or
    backends into the same folder is refused (`manifest_problem`: the records would mix two experiments)."""
    if (problem := manifest_problem(recipe)) is not None:
        raise RecipeError(f"out: {problem}")
    manifest = {"recipe": recipe.model_dump(mode="json", exclude={"shard", "concurrency", "progress"}),
                **manifest_identity(recipe), "git_revision": git_revision(), "tasks": n_tasks}
    write_json_atomic(out_dir / "manifest.json", redact_tree(manifest))  # no key in a manifest


def shard_path(out: str | Path, i: int, n: int) -> Path:
    """The trajectory file of shard `i` of `n` under `out` (collect's, whatever the shard count; a sharded eval's).

    >>> shard_path("runs/x", 1, 4).as_posix()
    'runs/x/trajectories.shard-1-of-4.jsonl'
    """
    return Path(out) / f"trajectories.shard-{i}-of-{n}.jsonl"


def records_file(recipe: RolloutRecipe, out_file: str | Path | None = None) -> Path:
    """The trajectory file a run of `recipe` appends to and resumes: `out_file` when the caller names one (eval's
    OUT/trajectories.jsonl), else the shard's file under `recipe.out` (`shard_path`, as
    `RolloutOptions.from_recipe` names it)."""
    i, n = recipe.shard_index
    return Path(out_file) if out_file is not None else shard_path(recipe.out, i, n)


def out_problems(recipe: RolloutRecipe, out_file: str | Path) -> list[str]:
    """Why a run of `recipe` writing `out_file` is refused before its first write, one line each: another process
    holds the file (`store.busy_problem`), the folder holds another experiment (`manifest_problem`), the file is not
    JSONL to resume (`store.resume_problem`). Writes nothing: the dry run lists them as `out` errors, the engine
    (`engine.claimed`, under the lock) refuses on the first in that error line's words."""
    found = (busy_problem(out_file), manifest_problem(recipe), resume_problem(out_file))
    return [problem for problem in found if problem is not None]


@contextmanager
def one_writer(out_file: str | Path) -> Iterator[None]:
    """The trajectory file's lock for the block (`outputs.exclusive`), refused first in the dry run's words when
    another process holds it (`store.busy_problem`; `exclusive` still refuses one that takes it in between)."""
    if (problem := busy_problem(out_file)) is not None:
        raise OutputBusy(f"out: {problem}")
    with exclusive(out_file):
        yield


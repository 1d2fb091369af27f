"""The import rules (docs/architecture.md, "Layers and import direction") as a table: for each package, the
`omnidecision.*` packages its modules may import (`ALLOWED`), some of them only inside functions (`LAZY_ONLY`), and
one table of named module-to-module exceptions, each with its reason (`EXCEPTIONS`).
`python tests/architecture/test_import_rules.py` prints the layer picture and the table the doc shows (both drawn from
`ALLOWED`, `LAZY_ONLY` and `EXCEPTIONS`; a test checks the page holds them).

Checked twice:

- read from the source (`ast`): EVERY `import` / `from … import` of a project module, those inside functions
  included, is checked against the table (`rule_violations`). A lazy import of a heavy third-party library (torch,
  TRL, vLLM) is not a project import and stays free; a lazy import of a project module obeys the same table as a
  module-level one. Planting `from omnidecision.agent import loop` inside a function of
  `omnidecision/rewards/checks.py` makes `test_every_import_follows_the_rules` fail, naming file, line and package
  (`test_a_planted_lazy_import_is_reported` does exactly that in a copy of the package);
- measured from `sys.modules` in a fresh interpreter: what importing each package (and every module inside it)
  loads, through any chain of module-level imports (`test_package_loads_only_what_it_may`).

- read from the strings (`string_path_violations`): a dotted path to project code in a string of the package
  ("omnidecision.x.y:Name" or "omnidecision.x.y.Name", docstrings aside: prose) or in a recipe under `configs/`
  (whose folder's reader is `CONFIG_READERS`) is a tie that `importlib` makes at run time, so it obeys the same
  table as an import inside a function. Planting "omnidecision.agent.loop:X" in `omnidecision/rl/` or a rollout
  path in a GRPO recipe fails `test_every_string_path_follows_the_rules`
  (`test_a_planted_string_path_is_reported` does it in copies).

No import circles among the project's modules, read from the source (`ast`): a module imports another when any
`import`/`from … import` statement in it names that module (or a name inside it). Two graphs are checked: the
module-level imports (a circle there is an import-order failure waiting to happen) and every import, those inside
functions included: a lazy import that closes a circle defers the failure, it does not remove the knot (what one
module needs from the other belongs in a third, lower one). Moving `is_correct` back into `eval/report.py` (which
`eval/outcomes.py` reads) makes `test_no_import_circles[all]` fail, printing the circle.
"""

from __future__ import annotations

import ast
import functools
import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

LEDGER = {"ledger"}
PROTOCOL = LEDGER | {"protocol"}
# leaves every writer may use: outputs (stdlib only: locks, atomic files, output folders) and options (Typer only:
# the command-line options several commands declare alike, such as --replace)
OUTPUTS = {"outputs", "options"}
TASKS = PROTOCOL | OUTPUTS | {"tasks"}
TOOLS = TASKS | {"tools"}  # tools read task records
AGENT = TOOLS | {"backends", "agent"}
INPUTS = {"inputs"}  # a leaf: local path or hub id, every row of a data file (what preflight and the stages read)
ROLLOUT = AGENT | INPUTS | {"rollout", "preflight", "provenance"}  # the engine below every stage that runs the agent
# package -> the omnidecision packages (and top-level modules) its modules may import, anywhere
ALLOWED: dict[str, set[str]] = {
    "ledger": LEDGER,
    "protocol": PROTOCOL,
    "synthetic": PROTOCOL | {"synthetic", "modeling"},
    "tools": TOOLS,
    "tasks": TASKS,
    # the perception backend decodes frames with the tools' media helpers; the local backend decodes with the one
    # planner loader
    "backends": TOOLS | {"backends", "modeling"},
    "agent": AGENT,
    "rollout": ROLLOUT,
    # resume a recorded run at any step and branch it: reads records and recipes through the engine, runs the agent
    "branch": ROLLOUT | {"branch"},
    "collect": ROLLOUT | {"collect"},  # rollouts recorded for training: harvest, data card
    "eval": ROLLOUT | {"eval", "serving", "procs", "stats"},  # rollouts reported
    # rounds collect through eval (which serves the planner), harvest through collect
    "onpolicy": ROLLOUT | {"collect", "eval", "onpolicy", "serving", "procs"},
    # executed returns, the reward audit, the executed reward: on the rollout engine; scores proxies with rewards;
    # GRPO with the agent in the loop (grpo.py): the decision GRPO's phases (rl) with the environment and the
    # executed reward brought by import; the price table only inside functions
    "grounding": ROLLOUT | {"grounding", "branch", "rewards", "stats", "rl", "eval", "modeling", "checkpoints",
                            "launch"},
    "rewards": PROTOCOL | {"rewards"},  # never agent, never tasks: rewards score ledger states only
    "sft": PROTOCOL | OUTPUTS | INPUTS | {"sft", "rewards", "synthetic", "checkpoints", "modeling", "preflight",
                                          "provenance", "launch", "export", "preemption", "sampling"},
    "rl": PROTOCOL | OUTPUTS | INPUTS | {"rl", "rewards", "synthetic", "checkpoints", "modeling", "stats",
                                         "preflight", "provenance", "launch", "preemption"},
    "serving": {"serving", "preflight", "provenance", "procs"},
    "view": PROTOCOL | OUTPUTS | {"view"},  # the site is written whole (outputs.staged_output)
    # top-level modules: leaves that the stages share (torch, TRL and the stages themselves load lazily)
    "preflight": {"preflight", "checkpoints", "outputs", "inputs"},
    "inputs": INPUTS,
    "modeling": {"modeling"},
    "preemption": {"preemption"},  # the trainers' checkpoint on SIGTERM (a SLURM preemption or requeue)
    "node_launch": {"node_launch"},  # the CPU nodes' trainer as the SLURM task (accelerate's launch, exec'd)
    "procs": {"procs"},  # children that do not outlive their parent (the plan runner, the vLLM server)
    "sampling": {"sampling"},  # the length-grouped sampler seeded by (seed, epoch): exact resumes
    "checkpoints": {"checkpoints", "outputs"},
    # below the stages: each passes its `Stage` and entry points as objects
    "launch": {"launch", "preflight", "outputs"},
    "export": {"export", "modeling", "provenance", "preflight", "outputs"},
    "stats": {"stats"},
    "provenance": {"provenance", "outputs"},
    "outputs": {"outputs"},
    "options": {"options"},
    "gpustats": {"gpustats"},
    "smoke": {"smoke", "modeling", "synthetic"},
    # the demo and the experiment: lists of the stages' commands, run as processes; what they read of the stages'
    # outputs (records, reports, contrasts, the view) by import
    "pipeline": {"pipeline", "rollout", "eval", "stats", "view", "provenance", "outputs", "procs"},
}
# package -> the packages of its row it may import only inside functions (never loaded when it is imported)
LAZY_ONLY: dict[str, set[str]] = {"grounding": {"eval"}}
# (importing module, imported module) -> why this one import crosses the table; nothing else may
EXCEPTIONS: dict[tuple[str, str], str] = {
    ("omnidecision.rewards.llm_judge", "omnidecision.backends.openai_backend"):
        "the LLM reward judge calls its endpoint through the project's one OpenAI-compatible client, loaded only "
        "when a recipe names an LLM judge",
    ("omnidecision.sft.train", "omnidecision.rl.evaluate"):
        "SFT's dev_closure checkpoint selection scores its candidates with the closure evaluator that chooses every "
        "post-SFT arm's checkpoint (one label-free dev score for all arms)",
    ("omnidecision.onpolicy.rounds", "omnidecision.rl.sources"):
        "an RL round reads its GRPO recipe's state_sources with GRPO's own parser, only when the round runs GRPO",
    ("omnidecision.preflight", "omnidecision.protocol.redaction"):
        "the dry-run printer hides every registered key by value (redaction loads protocol.secrets only, no ledger)",
    ("omnidecision.serving.vllm_server", "omnidecision.protocol.redaction"):
        "vLLM's command line and log tail are printed with `--api-key` values hidden (the one redactor)",
}
# configs/<folder>/ -> the package whose command reads those recipes (the row a string path in them obeys)
CONFIG_READERS: dict[str, str] = {"ablate": "eval", "accelerate": "launch", "collect": "collect", "eval": "eval",
                                  "experiment": "pipeline", "grpo": "rl", "judge": "rl", "prices": "eval",
                                  "rounds": "onpolicy", "sft": "sft"}
# Top-level modules without a row: the command line (it mounts every stage, so it may load everything) and the demo
# (the pipeline's command lists, above every stage).
UNRULED = {"cli", "demo", "__init__", "__main__"}

_PROBE = """
import importlib, json, pkgutil, sys
name = "omnidecision." + sys.argv[1]
pkg = importlib.import_module(name)
for info in pkgutil.walk_packages(getattr(pkg, "__path__", []), name + "."):  # a top-level module: itself only
    if not info.name.endswith("__main__"):
        importlib.import_module(info.name)
print(json.dumps(sorted({k.split(".")[1] for k in sys.modules if k.startswith("omnidecision.")})))
"""


def _probe(package: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _PROBE, package], capture_output=True, text=True, timeout=300)


@functools.cache
def _probes() -> dict[str, subprocess.CompletedProcess[str]]:
    """Every package's probe, each in a fresh interpreter (it must start from an empty `sys.modules`), run side by
    side, one per core: together they were most of this file's time, one after the other."""
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        return dict(zip(sorted(ALLOWED), pool.map(_probe, sorted(ALLOWED)), strict=True))


def loaded_by(package: str) -> set[str]:
    """The project packages that importing `package` (and every module under it) loads, in a fresh interpreter."""
    out = _probes()[package]
    assert out.returncode == 0, f"importing omnidecision.{package} failed:\n{out.stderr[-2000:]}"
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def may_load(package: str, allowed: dict[str, set[str]] = ALLOWED, lazy_only: dict[str, set[str]] = LAZY_ONLY,
             exceptions: dict[tuple[str, str], str] = EXCEPTIONS) -> set[str]:
    """What importing `package` may load: its row less what it imports only inside functions, the packages its
    listed exceptions import, and what each of those may load in turn (a package that may import preflight loads
    what preflight imports at its top)."""
    crossing: dict[str, set[str]] = {}
    for importer, target in exceptions:
        crossing.setdefault(_layer(importer), set()).add(_layer(target))
    found: set[str] = set()
    todo = [package]
    while todo:
        p = todo.pop()
        for q in (allowed.get(p, {p}) - lazy_only.get(p, set())) | crossing.get(p, set()):
            if q not in found:
                found.add(q)
                todo.append(q)
    return found | {package}


def test_what_a_package_may_load_follows_the_rows() -> None:
    toy = {"a": {"a", "x"}, "b": {"b", "a", "c"}, "c": {"c", "y"}, "x": {"x"}, "y": {"y"}}
    assert may_load("b", toy, {}, {}) == {"a", "b", "c", "x", "y"}
    assert may_load("b", toy, {"b": {"c"}}, {}) == {"a", "b", "x"}  # c (and what only c brings): inside functions
    crossing = {("omnidecision.x.m", "omnidecision.y.n"): "why"}  # x's one listed import of y
    assert may_load("a", {**toy, "y": {"y"}}, {}, crossing) == {"a", "x", "y"}


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_package_loads_only_what_it_may(package: str) -> None:
    extra = loaded_by(package) - may_load(package)
    assert not extra, f"omnidecision.{package} loads {sorted(extra)}, which docs/architecture.md forbids"


def test_provenance_is_a_bottom_module() -> None:
    """`omnidecision.provenance` (written by every trained stage, read by export, eval and serving) loads no other
    project module but `outputs` (the standard-library leaf that writes files atomically), so any layer may use
    it."""
    code = ("import json, sys, omnidecision.provenance; "
            "print(json.dumps(sorted({k.split('.')[1] for k in sys.modules if k.startswith('omnidecision.')})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == ["outputs", "provenance"]


def project_imports(root: Path) -> dict[str, list[tuple[str, int, bool]]]:
    """module -> (imported project module, line, inside a function) for every `import` statement of the package at
    `root`. `from pkg import name` counts as importing `pkg.name` when that is a module, else `pkg`."""
    modules: dict[str, Path] = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path

    def owner(name: str) -> str | None:  # the module a dotted name lives in
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    found: dict[str, list[tuple[str, int, bool]]] = {}
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        names = _imported_names(ast.parse(path.read_text("utf-8"), str(path)), package)
        found[module] = [(target, line, lazy) for name, line, lazy in names
                         if (target := owner(name)) is not None and target != module]
    return found


def import_graph(root: Path, *, local: bool) -> dict[str, set[str]]:
    """module -> the project modules it imports (module-level only, or with `local` the imports inside functions
    too)."""
    return {module: {t for t, _, lazy in imports if local or not lazy}
            for module, imports in project_imports(root).items()}


def _imported_names(tree: ast.AST, package: str) -> list[tuple[str, int, bool]]:
    """(dotted name, line, inside a function) for each name the `import` statements of a module name."""
    names: list[tuple[str, int, bool]] = []
    stack: list[tuple[ast.AST, bool]] = [(tree, False)]  # (node, inside a function)
    while stack:
        node, in_function = stack.pop()
        if isinstance(node, ast.Import):
            names += [(a.name, node.lineno, in_function) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the module's package, one level up per extra dot
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - (node.level - 1)] + ([base] if base else []))
            names += [(f"{base}.{a.name}", node.lineno, in_function) for a in node.names]
        inner = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        stack.extend((child, inner) for child in ast.iter_child_nodes(node))
    return names


def _layer(module: str) -> str:
    """The row of a project module: its package, or its own name for a top-level module (`__init__`: the root)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def rule_violations(root: Path, allowed: dict[str, set[str]], lazy_only: dict[str, set[str]],
                    exceptions: dict[tuple[str, str], str], unruled: set[str]) -> tuple[list[str], set]:
    """Every project import of the package at `root` (inside functions too) that its row of `allowed` forbids, or
    that `lazy_only` forbids at module level, as "path:line: module imports target (…)"; and the exceptions used."""
    problems: list[str] = []
    used: set[tuple[str, str]] = set()
    for module, imports in sorted(project_imports(root).items()):
        layer = _layer(module)
        if layer in unruled:
            continue
        may = allowed.get(layer)
        where = root.parent.joinpath(*module.split(".")).with_suffix(".py")
        if not where.exists():
            where = where.with_suffix("") / "__init__.py"
        for target, line, lazy in imports:
            other = _layer(target)
            if other == layer or other == "__init__":
                continue
            if (module, target) in exceptions:
                used.add((module, target))
                continue
            if may is None or other not in may:
                problems.append(f"{where}:{line}: {module} imports {target}{' inside a function' if lazy else ''}: "
                                f"{layer} may not import {other}")
            elif not lazy and other in lazy_only.get(layer, set()):
                problems.append(f"{where}:{line}: {module} imports {target} at module level: {layer} may import "
                                f"{other} only inside functions")
    return problems, used


def test_every_import_follows_the_rules() -> None:
    """Every project import, those inside functions included, keeps the table (or is a listed exception); and every
    exception is still needed."""
    import omnidecision

    problems, used = rule_violations(Path(omnidecision.__file__).parent, ALLOWED, LAZY_ONLY, EXCEPTIONS, UNRULED)
    assert not problems, "imports docs/architecture.md forbids:\n" + "\n".join(problems)
    assert set(EXCEPTIONS) == used, f"exceptions no import needs any more: {sorted(set(EXCEPTIONS) - used)}"


def test_a_planted_lazy_import_is_reported(tmp_path: Path) -> None:
    """The test of the test: in a copy of the package, an agent import planted inside a function of the rewards
    (which never import the agent) and a module-level import in a planted package whose row allows it only inside
    functions are both reported, with file and line; the unchanged copy is clean."""
    import shutil

    import omnidecision

    root = tmp_path / "omnidecision"
    shutil.copytree(Path(omnidecision.__file__).parent, root, ignore=shutil.ignore_patterns("__pycache__"))
    assert rule_violations(root, ALLOWED, LAZY_ONLY, EXCEPTIONS, UNRULED)[0] == []
    checks = root / "rewards" / "checks.py"
    lines = checks.read_text("utf-8").splitlines()
    checks.write_text("\n".join([*lines, "", "", "def _planted():", "    from omnidecision.agent import loop",
                                  "", "    return loop", ""]), "utf-8")
    (root / "planted").mkdir()
    (root / "planted" / "__init__.py").write_text("", "utf-8")
    (root / "planted" / "lazy.py").write_text("from omnidecision.eval import report\n", "utf-8")
    allowed, lazy_only = {**ALLOWED, "planted": {"planted", "eval"}}, {**LAZY_ONLY, "planted": {"eval"}}
    problems, _ = rule_violations(root, allowed, lazy_only, EXCEPTIONS, UNRULED)
    assert sorted(problems) == [
        f"{root / 'planted' / 'lazy.py'}:1: omnidecision.planted.lazy imports omnidecision.eval.report at "
        "module level: planted may import eval only inside functions",
        f"{checks}:{len(lines) + 4}: omnidecision.rewards.checks imports omnidecision.agent.loop inside a function: "
        "rewards may not import agent",
    ]


STRING_PATH = re.compile(r"\bomnidecision(?:\.[A-Za-z_]\w*)+(?::[A-Za-z_]\w*)?")


def _module_owner(root: Path) -> Any:
    """A function: dotted name (or "module:attr") -> the project module it lives in, or None (`root`: the package)."""
    modules = {".".join(p[:-1] if p[-1] == "__init__" else p)
               for p in (list(path.relative_to(root.parent).with_suffix("").parts) for path in root.rglob("*.py"))}

    def owner(name: str) -> str | None:
        name = name.partition(":")[0]
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    return owner


def _code_strings(path: Path) -> list[tuple[str, int]]:
    """(text, line) of every string constant of a module but its docstrings (prose, not paths a program follows)."""
    tree = ast.parse(path.read_text("utf-8"), str(path))
    scopes = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    docstrings = {id(node.body[0].value) for node in ast.walk(tree) if isinstance(node, scopes) and node.body
                  and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return [(node.value, node.lineno) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings]


def _recipe_strings(path: Path) -> list[tuple[str, int]]:
    """(text, line) of every scalar of a YAML recipe, keys included (comments are not read)."""
    import yaml

    found: list[tuple[str, int]] = []
    stack = [yaml.compose(path.read_text("utf-8"))]
    while stack:
        node = stack.pop()
        if isinstance(node, yaml.ScalarNode):
            found.append((str(node.value), node.start_mark.line + 1))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
        elif isinstance(node, yaml.MappingNode):
            stack.extend(n for pair in node.value for n in pair)
    return found


def string_path_violations(root: Path, configs: Path | None, allowed: dict[str, set[str]],
                           exceptions: dict[tuple[str, str], str], unruled: set[str]) -> list[str]:
    """Every dotted path to project code in a string of the package at `root` (docstrings aside) or in a recipe
    under `configs` (read by `CONFIG_READERS[folder]`) that the reader's row of `allowed` forbids, as
    "path:line: reader names target in a string (…)". The command line (`unruled`, e.g. `python -m omnidecision.cli`
    started as a process) is no code path."""
    owner = _module_owner(root)
    places: list[tuple[str, str, Path, list[tuple[str, int]]]] = []  # (reader module, its row, file, strings)
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        places.append((module, _layer(module), path, _code_strings(path)))
    for path in sorted(configs.rglob("*.yaml")) if configs is not None else []:
        reader = CONFIG_READERS.get(path.relative_to(configs).parts[0], "")
        places.append((f"configs/{path.relative_to(configs)}", reader, path, _recipe_strings(path)))
    problems: list[str] = []
    for module, layer, path, strings in places:
        if layer in unruled:
            continue
        for text, line in strings:
            for hit in STRING_PATH.findall(text):
                target = owner(hit)
                other = _layer(target) if target else ""
                if not target or other in (layer, "__init__") or other in unruled or (module, target) in exceptions:
                    continue
                if other not in allowed.get(layer, set()):
                    problems.append(f"{path}:{line}: {module} names {hit} in a string: {layer or 'no reader'} may "
                                    f"not import {other}")
    return problems


def test_every_string_path_follows_the_rules() -> None:
    """A string naming project code (a recipe's reward or environment path, an entry's `module:attr`) is an import
    made at run time: it keeps the table, in the package and in the shipped recipes; every recipe folder has a
    reader."""
    import omnidecision

    root = Path(omnidecision.__file__).parent
    configs = root.parent / "configs"
    assert {p.name for p in configs.iterdir() if p.is_dir()} <= set(CONFIG_READERS), \
        "a new configs/ folder needs its reader in CONFIG_READERS"
    problems = string_path_violations(root, configs, ALLOWED, EXCEPTIONS, UNRULED)
    assert not problems, "string paths docs/architecture.md forbids:\n" + "\n".join(problems)


def test_a_planted_string_path_is_reported(tmp_path: Path) -> None:
    """The test of the test: a planted "omnidecision.agent.loop:X" in a copy of rl, and a rollout path in a copy of
    a GRPO recipe, are both reported with file and line; the unchanged copies are clean."""
    import shutil

    import omnidecision

    source = Path(omnidecision.__file__).parent
    root, configs = tmp_path / "omnidecision", tmp_path / "configs"
    shutil.copytree(source, root, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(source.parent / "configs", configs)
    assert string_path_violations(root, configs, ALLOWED, EXCEPTIONS, UNRULED) == []
    config = root / "rl" / "config.py"
    lines = config.read_text("utf-8").splitlines()
    config.write_text("\n".join([*lines, "", '_PLANTED = {"ledger": "omnidecision.agent.loop:X"}', ""]), "utf-8")
    recipe = configs / "grpo" / "tiny-cpu.yaml"
    recipe.write_text(recipe.read_text("utf-8") + "reward_funcs: [omnidecision.rollout.runner.judge_record]\n",
                      "utf-8")
    recipe_line = len(recipe.read_text("utf-8").splitlines())
    assert sorted(string_path_violations(root, configs, ALLOWED, EXCEPTIONS, UNRULED)) == sorted([
        f"{config}:{len(lines) + 2}: omnidecision.rl.config names omnidecision.agent.loop:X in a string: rl may not "
        "import agent",
        f"{recipe}:{recipe_line}: configs/grpo/tiny-cpu.yaml names omnidecision.rollout.runner.judge_record in a "
        "string: rl may not import rollout",
    ])


def test_eval_imports_nothing_from_collect() -> None:
    """eval = rollouts reported, collect = rollouts recorded for training: both stand on the rollout engine, and
    eval reaches nothing of collect, not even inside a function."""
    import omnidecision

    imports = project_imports(Path(omnidecision.__file__).parent)
    eval_modules = [m for m in imports if m.startswith("omnidecision.eval.")]
    assert len(eval_modules) > 10, "the eval package was not read"
    found = [f"{m}:{line} imports {t}" for m in eval_modules for t, line, _ in imports[m]
             if t == "omnidecision.collect" or t.startswith("omnidecision.collect.")]
    assert not found, found


def find_circle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle (a, b, …, a), or None: depth-first search for an edge back into the current path."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def dfs(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (found := dfs(nxt)) is not None:
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := dfs(start)) is not None:
            return found
    return None


def test_find_circle_finds_one():
    assert find_circle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_circle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


@pytest.mark.parametrize("scope", ["module_level", "all"])
def test_no_import_circles(scope: str) -> None:
    import omnidecision

    graph = import_graph(Path(omnidecision.__file__).parent, local=scope == "all")
    assert len(graph) > 100 and graph["omnidecision.eval.report"], "the import graph was not read"
    circle = find_circle(graph)
    assert circle is None, f"import circle ({scope} imports): {' -> '.join(circle)}"


def render_table() -> str:
    """ALLOWED as the Markdown table docs/architecture.md shows (rows and cells in layer order), with LAZY_ONLY
    marked and the exceptions below it."""
    order = ["ledger", "protocol", "tasks", "tools", "backends", "agent", "rollout", "branch", "collect", "eval",
             "onpolicy", "grounding", "rewards", "sft", "rl", "synthetic", "serving", "view", "preflight", "modeling",
             "preemption", "sampling", "procs", "checkpoints", "launch", "export", "stats", "gpustats", "smoke",
             "pipeline", "outputs", "inputs"]
    rank = {name: i for i, name in enumerate(order)}
    lines = ["| package | may import, inside functions too (besides itself) |", "| --- | --- |"]
    for package in sorted(ALLOWED, key=lambda p: rank.get(p, len(order))):
        others = sorted(ALLOWED[package] - {package}, key=lambda p: (rank.get(p, len(order)), p))
        lazy = LAZY_ONLY.get(package, set())
        cells = [f"{p} (inside functions only)" if p in lazy else p for p in others]
        lines.append(f"| {package} | {', '.join(cells) or '—'} |")
    lines += ["", "| exception: module | imports | why |", "| --- | --- | --- |"]
    lines += [f"| {a} | {b} | {why} |" for (a, b), why in sorted(EXCEPTIONS.items())]
    return "\n".join(lines)


def test_architecture_doc_shows_this_table() -> None:
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "architecture.md").read_text("utf-8")
    assert render_table() in doc, "docs/architecture.md: paste the table `python tests/architecture/" \
        "test_import_rules.py` prints"


def test_every_package_has_a_rule() -> None:
    from pathlib import Path

    import omnidecision

    root = Path(omnidecision.__file__).parent
    packages = {p.parent.name for p in root.glob("*/__init__.py")}
    assert packages - set(ALLOWED) == set(), "a new package needs its row in ALLOWED"
    modules = {p.stem for p in root.glob("*.py")} - UNRULED
    assert modules - set(ALLOWED) == set(), "a new top-level module needs its row in ALLOWED"


def floors(allowed: dict[str, set[str]]) -> dict[str, int]:
    """package -> its floor: 1 for a package that may import no other, else one above the highest it may import
    (the table is a layering: a circle in it is an error)."""
    found: dict[str, int] = {}

    def floor(package: str, seen: tuple[str, ...] = ()) -> int:
        if package in seen:
            raise ValueError(f"the table has a circle: {' -> '.join((*seen, package))}")
        if package not in found:
            below = [floor(q, (*seen, package)) for q in allowed.get(package, set()) - {package}]
            found[package] = 1 + max(below, default=0)
        return found[package]

    for package in allowed:
        floor(package)
    return found


def direct_uses(allowed: dict[str, set[str]], lazy_only: dict[str, set[str]] | None = None) -> dict[str, set[str]]:
    """package -> what it may import that no other package of its row already may (the table without the edges a
    longer way implies: the arrows the picture draws); a way through a package of the row that `lazy_only` defers
    implies no module-level arrow."""
    lazy_only = lazy_only or {}
    reach: dict[str, set[str]] = {}

    def below(package: str) -> set[str]:
        if package not in reach:
            reach[package] = set()
            for q in allowed.get(package, set()) - {package}:
                reach[package] |= {q} | below(q)
        return reach[package]

    def implied(p: str, q: str) -> bool:
        lazy = lazy_only.get(p, set())
        return any(q in below(r) and (r not in lazy or q in lazy) for r in allowed[p] - {p, q})

    return {p: {q for q in allowed[p] - {p} if not implied(p, q)} for p in allowed}


def render_picture() -> str:
    """The layer picture docs/architecture.md shows, drawn from ALLOWED and LAZY_ONLY: every package on its floor
    (top: the most dependent), each with the packages it uses directly (`*`: only inside functions)."""
    level, uses = floors(ALLOWED), direct_uses(ALLOWED, LAZY_ONLY)
    width = max(len(p) for p in ALLOWED)
    lines = ["floor  package" + " " * (width - 7) + "  uses (directly; * only inside functions)"]
    for package in sorted(ALLOWED, key=lambda p: (-level[p], p)):
        lazy = LAZY_ONLY.get(package, set())
        used = sorted(uses[package], key=lambda q: (-level[q], q))
        cells = ", ".join(f"{q}*" if q in lazy else q for q in used) or "—"
        lines.append(f"{level[package]:>5}  {package:<{width}}  → {cells}")
    return "\n".join(lines)


def test_architecture_doc_shows_this_picture() -> None:
    """The layer picture of docs/architecture.md is the one the table draws (`render_picture`), every package in
    it: the page cannot drift from the rules the tests hold."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "architecture.md").read_text("utf-8")
    picture = render_picture()
    assert all(f"  {p} " in picture or picture.endswith(f"  {p}") for p in ALLOWED)
    assert picture in doc, "docs/architecture.md: paste the picture `python tests/architecture/" \
        "test_import_rules.py` prints"


def test_the_picture_places_every_package_on_its_floor() -> None:
    """The picture's floors and arrows follow the table: a toy table's floors, and the arrow a longer way implies
    left out."""
    toy = {"a": {"a"}, "b": {"a", "b"}, "c": {"a", "b", "c"}, "d": {"d", "a"}}
    assert floors(toy) == {"a": 1, "b": 2, "c": 3, "d": 2}
    assert direct_uses(toy) == {"a": set(), "b": {"a"}, "c": {"b"}, "d": {"a"}}
    # c reaches a through b only inside functions: its own module-level use of a is drawn
    assert direct_uses(toy, {"c": {"b"}})["c"] == {"a", "b"}
    with pytest.raises(ValueError, match="circle"):
        floors({"a": {"b"}, "b": {"a"}})


if __name__ == "__main__":
    print("```\n" + render_picture() + "\n```\n")
    print(render_table())

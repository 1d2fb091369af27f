"""`omnidecision ablate --grid`: the backend-swap grid (planner × perception) and its saturation reading.

The shipped synthetic grid runs end to end on CPU (its cells agree with each cell's report.json, the swaps with the
cells, the variants really differ), a restart runs only an unfinished cell, the saturation rule reads hand-made cell
results in both directions, a bad grid file is an error naming the file and the field, and the shipped OmniGAIA grid
resolves every cell in a dry run.

    .venv/bin/pytest tests/eval/test_grid.py -q
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from omnidecision.cli import app
from omnidecision.eval.grid_report import moves, saturation_reading, swap_deltas

ROOT = Path(__file__).resolve().parents[2]
SYNTH_GRID = ROOT / "configs" / "ablate" / "synthetic-grid.yaml"
OMNIGAIA_GRID = ROOT / "configs" / "ablate" / "omnigaia-grid.yaml"
DEV = ROOT / "tests" / "data" / "omnigaia_dev" / "dev_metadata.json"
VERDICTS = ("perception-bound", "planner-bound", "neither saturates", "unresolved", "interaction")


def _ablate(*args: str):
    return CliRunner().invoke(app, ["ablate", *args])


def _records(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "trajectories.jsonl").read_text("utf-8").splitlines()]


def _dropped(folder: Path) -> int:
    return sum(bool(((s.get("observation") or {}).get("fields") or {}).get("perception_dropped"))
               for r in _records(folder) for s in r["steps"])


# ---------------------------------------------------------------- the CPU grid, end to end, and its restart


def test_synthetic_grid_end_to_end_and_restart(synth_dir, tmp_path):
    out = tmp_path / "grid"
    args = ["--grid", str(SYNTH_GRID), "--out", str(out), "--tasks.path", str(synth_dir), "--no-progress"]
    res = _ablate(*args)
    assert res.exit_code == 0, res.output[-3000:]
    doc = json.loads((out / "grid.json").read_text("utf-8"))
    assert doc["planners"] == ["habits-teacher", "rule"] and doc["perceptions"] == ["degraded", "as-is"]
    md = (out / "grid.md").read_text("utf-8")

    # every cell of the table is its own report.json
    assert len(doc["cells"]) == 4
    for cell in doc["cells"]:
        folder = out / f"{cell['planner']}__{cell['perception']}"
        rep = json.loads((folder / "report.json").read_text("utf-8"))
        for key in ("accuracy", "ci95", "ci_method", "n", "n_tasks", "outcomes"):
            assert cell[key] == rep[key], (cell["name"], key)
        assert rep["n"] == 16 and rep["name"] == cell["name"]
        lo, hi = rep["ci95"]
        assert f"{100 * rep['accuracy']:.1f}% [{100 * lo:.1f}%, {100 * hi:.1f}%] (n=16)" in md

    # the swaps: one sample per task and every task shared, so Δ is the difference of the two cells' accuracies
    acc = {(c["planner"], c["perception"]): c["accuracy"] for c in doc["cells"]}
    assert [d["axis"] for d in doc["swaps"]] == ["planner", "planner", "perception", "perception", "both"]
    for d in doc["swaps"]:
        assert d["n"] == 16 and d["unpaired"] == 0
        assert d["delta"] == pytest.approx(acc[tuple(d["to"])] - acc[tuple(d["from"])], abs=1e-4)
        assert d["moves"] == moves(d["ci95"]) and d["ci95"][0] <= d["delta"] <= d["ci95"][1]
    reading = doc["reading"]
    assert len(reading["lines"]) == 5 and reading["verdict"].split(":")[0] in VERDICTS
    assert reading["verdict"] in md and all(line["sentence"] in md for line in reading["lines"])

    # the cells differ in what their variants set, and only in that
    for cell in doc["cells"]:
        folder = out / f"{cell['planner']}__{cell['perception']}"
        recipe = yaml.safe_load((folder / "recipe.yaml").read_text("utf-8"))
        habits = recipe["backends"]["planner"]["options"].get("habits")
        assert (habits == 0.5) == (cell["planner"] == "habits-teacher")
        assert recipe["backends"]["default"]["options"] == {"noise": 0.0, "seed": 0}  # the other roles stay
        assert (_dropped(folder) > 0) == (cell["perception"] == "degraded"), cell["name"]

    # restart: finished cells are not run again; a cell left unfinished (as by a kill) is completed
    reports = {c["name"]: out / f"{c['planner']}__{c['perception']}" / "report.json" for c in doc["cells"]}
    before = {name: p.stat().st_mtime_ns for name, p in reports.items()}
    marker = out / "rule__as-is" / "cell.json"
    state = json.loads(marker.read_text("utf-8"))
    assert state["finished"] is True
    marker.write_text(json.dumps({**state, "finished": False}), "utf-8")
    res = _ablate(*args)
    assert res.exit_code == 0, res.output[-3000:]
    changed = {name for name, p in reports.items() if p.stat().st_mtime_ns != before[name]}
    assert changed == {"rule × as-is"}
    assert json.loads(marker.read_text("utf-8"))["finished"] is True
    assert json.loads((out / "grid.json").read_text("utf-8")) == doc  # the same runs, the same grid
    assert len(_records(out / "rule__as-is")) == 16  # resumed, nothing run twice

    # a different command line into the same folders is refused before anything runs
    res = _ablate(*args, "--tasks.limit", "4")
    assert res.exit_code == 2 and "another recipe" in res.output and "new --out" in res.output


def test_synthetic_grid_dry_run_resolves_every_cell(synth_dir, tmp_path):
    out = tmp_path / "never"
    res = _ablate("--grid", str(SYNTH_GRID), "--out", str(out), "--tasks.path", str(synth_dir), "--dry-run")
    assert res.exit_code == 0, res.output[-3000:]
    report = json.loads(res.stdout[res.stdout.index("{"):])
    cells = report["extra"]["grid"]["cells"]
    assert [(c["planner"], c["perception"], c["state"]) for c in cells] == [
        ("habits-teacher", "degraded", "new"), ("habits-teacher", "as-is", "new"),
        ("rule", "degraded", "new"), ("rule", "as-is", "new")]
    for c in cells:
        assert c["out"] == str(out / f"{c['planner']}__{c['perception']}")
        assert ("agent.settings.perception_drop" in c["sets"]) == (c["perception"] == "degraded")
    commands = [w for w in report["would_run"] if w.startswith("omnidecision eval")]
    assert len(commands) == 4 and all(f"--tasks.path {synth_dir}" in w for w in commands)
    assert not out.exists()  # a dry run writes nothing


# ---------------------------------------------------------------- the saturation rule on hand-made cells

P, Q = ["weak-planner", "strong-planner"], ["weak-perception", "strong-perception"]


def _cells(solved: dict[tuple[str, str], int], n: int = 40) -> dict[tuple[str, str], dict[str, float]]:
    """Per cell, the first `solved` of n tasks correct (nested: a better cell solves a superset)."""
    return {cell: {f"t{i:02d}": float(i < k) for i in range(n)} for cell, k in solved.items()}


def _reading(solved):
    deltas = swap_deltas(P, Q, _cells(solved))
    return deltas, saturation_reading(deltas)


def _line(reading, axis: str, at: str) -> dict:
    (line,) = [x for x in reading["lines"] if x["axis"] == axis and x["at"] == at]
    return line


def test_perception_bound():
    deltas, reading = _reading({(P[0], Q[0]): 10, (P[1], Q[0]): 11, (P[0], Q[1]): 30, (P[1], Q[1]): 31})
    assert reading["perception"] == "every" and reading["planner"] == "none"
    assert reading["verdict"].startswith("perception-bound: upgrading perception moves accuracy at every planner")
    assert _line(reading, "perception", P[0])["moves"] == "raises"
    line = _line(reading, "planner", Q[0])
    assert line["moves"] is None and "within CI at perception weak-perception" in line["sentence"]
    assert "no planner effect resolved" in line["sentence"]
    (both,) = [d for d in deltas if d["axis"] == "both"]
    assert both["delta"] == pytest.approx(21 / 40, abs=1e-4) and both["moves"] == "raises"


def test_planner_bound_the_other_direction():
    _, reading = _reading({(P[0], Q[0]): 10, (P[1], Q[0]): 30, (P[0], Q[1]): 11, (P[1], Q[1]): 31})
    assert reading["planner"] == "every" and reading["perception"] == "none"
    assert reading["verdict"].startswith("planner-bound: upgrading the planner moves accuracy at every perception")
    assert "raises accuracy (+50.0 pts" in _line(reading, "planner", Q[1])["sentence"]


def test_planner_saturated_by_weak_perception():
    """The planner swap is within CI at weak perception and moves at strong perception: saturated by perception."""
    _, reading = _reading({(P[0], Q[0]): 10, (P[1], Q[0]): 10, (P[0], Q[1]): 20, (P[1], Q[1]): 36})
    weak = _line(reading, "planner", Q[0])
    assert weak["moves"] is None and weak["sentence"].endswith("saturated by perception")
    assert _line(reading, "planner", Q[1])["moves"] == "raises"
    assert reading["planner"] == "some" and reading["perception"] == "every"
    assert reading["verdict"] == (
        "interaction: planner swaps move accuracy at perception strong-perception but stay within CI at "
        "weak-perception (saturated by perception there); perception swaps move accuracy at every planner")


def test_neither_unresolved_and_a_swap_that_lowers():
    _, reading = _reading({(P[0], Q[0]): 5, (P[1], Q[0]): 20, (P[0], Q[1]): 20, (P[1], Q[1]): 35})
    assert reading["verdict"].startswith("neither saturates")
    _, reading = _reading({(P[0], Q[0]): 20, (P[1], Q[0]): 20, (P[0], Q[1]): 20, (P[1], Q[1]): 21})
    assert reading["verdict"].startswith("unresolved")
    _, reading = _reading({(P[0], Q[0]): 30, (P[1], Q[0]): 10, (P[0], Q[1]): 30, (P[1], Q[1]): 10})
    assert reading["planner"] == "every"
    assert "lowers accuracy (-50.0 pts" in _line(reading, "planner", Q[0])["sentence"]


# ---------------------------------------------------------------- bad grid files

GOOD = {"base": str(ROOT / "configs" / "eval" / "synthetic-rule.yaml"),
        "planner": {"a": {}, "b": {"backends.planner": {"kind": "teacher"}}},
        "perception": {"x": {}, "y": {"agent.settings.perception_drop": 0.5}}}


@pytest.mark.parametrize("change, field, words", [
    ({"perception": None}, "perception", "Field required"),
    ({"planer": {}}, "planer", "Extra inputs"),
    ({"planner": {"only": {}}}, "planner", "at least two"),
    ({"planner": {"a": {}, "b b": {}}}, "planner", "a name for a folder"),
    ({"planner": {"a": {}, "b": {"backends planner": 1}}}, "planner", "not a recipe key path"),
    ({"overrides": {"out": "x"}}, "overrides", "sets `out` and `name`"),
    ({"planner": {"a": {}, "b": {"agent.settings": {"draft_on_stop": False}}}}, "planner.b sets 'agent.settings'",
     "may not change"),
    ({"base": "missing.yaml"}, "base", "no eval recipe"),
    ({"perception": {"x": {}, "y": {"agent.settings.perception_drop": 2}}}, "agent.settings.perception_drop",
     "cell a × y"),
    ({"overrides": {"tasks.limit": 2}, "perception": {"x": {}, "y": {"tasks.limit": 3}}}, "cell a × y",
     "same tasks"),
])
def test_bad_grid_file_names_file_and_field(tmp_path, synth_dir, change, field, words):
    data = {**GOOD, **change}
    data = {k: v for k, v in data.items() if v is not None or k != "perception"}
    path = tmp_path / "bad-grid.yaml"
    path.write_text(yaml.safe_dump(data), "utf-8")
    for dry in ([], ["--dry-run"]):
        res = _ablate("--grid", str(path), "--out", str(tmp_path / "out"), "--tasks.path", str(synth_dir), *dry)
        assert res.exit_code == 2, res.output[-2000:]
        assert str(path) in res.output and field in res.output and words in res.output, res.output[-2000:]
    assert not (tmp_path / "out").exists()


def test_grid_and_config_are_exclusive(tmp_path):
    res = _ablate("--out", str(tmp_path))
    assert res.exit_code == 2 and "--grid" in res.output
    res = _ablate("--grid", str(SYNTH_GRID), "--modes", "react")
    assert res.exit_code == 2 and "--modes" in res.output


# ---------------------------------------------------------------- the OmniGAIA cluster grid


@pytest.fixture
def live_env(monkeypatch, tmp_path):
    sft = tmp_path / "qwen3-8b-sft"
    sft.mkdir()
    (sft / "config.json").write_text("{}")
    down = "http://127.0.0.1:9"  # nothing answers there: the dry run names each endpoint
    env = {"OD_OMNIGAIA": str(DEV), "OD_MEDIA_ROOT": str(tmp_path), "OD_SEARXNG_URL": down,
           "OD_BASE_URL": f"{down}/v1", "OD_PLANNER_DIR": str(sft),
           "OD_PERCEPTION_SMALL_URL": f"{down}/small/v1", "OD_PERCEPTION_SMALL_MODEL": "qwen2.5-omni-3b",
           "OD_PERCEPTION_LARGE_URL": f"{down}/large/v1", "OD_PERCEPTION_LARGE_MODEL": "qwen2.5-omni-7b"}
    for var in ("OD_BASE_PLANNER", "OD_PERCEPTION_URL", "OD_PERCEPTION_MODEL"):
        monkeypatch.delenv(var, raising=False)  # the base recipe's single perception endpoint is not needed
    for var, value in env.items():
        monkeypatch.setenv(var, value)

    def no_vllm(args):  # vLLM's own parser (a 20 s import) is not what this test checks
        raise ImportError

    monkeypatch.setattr("omnidecision.serving.vllm_server.vllm_arg_error", no_vllm)
    return env


def test_omnigaia_grid_dry_run(live_env, tmp_path, hub_unreachable):
    out = tmp_path / "grid"
    res = _ablate("--grid", str(OMNIGAIA_GRID), "--out", str(out), "--tasks.limit", "2", "--dry-run")
    report = json.loads(res.stdout[res.stdout.index("{"):])
    cells = {(c["planner"], c["perception"]): c for c in report["extra"]["grid"]["cells"]}
    assert list(cells) == [("qwen3-8b-base", "omni-small"), ("qwen3-8b-base", "omni-large"),
                           ("qwen3-8b-sft", "omni-small"), ("qwen3-8b-sft", "omni-large")]
    planner_model = {"qwen3-8b-base": "Qwen/Qwen3-8B", "qwen3-8b-sft": live_env["OD_PLANNER_DIR"]}
    for (p, q), c in cells.items():
        size = q.split("-")[1].upper()
        assert c["sets"]["serve.model"] == planner_model[p]
        assert c["sets"]["environment.perception.default.base_url"] == live_env[f"OD_PERCEPTION_{size}_URL"]
        assert c["sets"]["environment.perception.default.model"] == live_env[f"OD_PERCEPTION_{size}_MODEL"]
        assert c["state"] == "new" and c["out"] == str(out / f"{p}__{q}")
    # the grid resolves; what fails is only what this machine cannot reach (endpoints, media)
    errors = [c for c in report["checks"] if c["status"] == "error"]
    assert res.exit_code == 2 and errors
    assert all(c["what"] == "environment" for c in errors), errors
    for size in ("small", "large"):
        (probe,) = [c for c in errors if f"/{size}/v1/models does not answer" in c["detail"]]
        assert probe["detail"].startswith(f"[qwen3-8b-base × omni-{size}, qwen3-8b-sft × omni-{size}] ")
    assert report["command"] == "ablate"
    served = [w for w in report["would_run"] if "vllm.entrypoints.openai.api_server" in w]
    assert len(served) == 4 and sum("--model Qwen/Qwen3-8B" in w for w in served) == 2
    assert not out.exists()


def test_omnigaia_grid_names_unset_variables(live_env, monkeypatch, tmp_path):
    monkeypatch.delenv("OD_PERCEPTION_LARGE_MODEL")
    res = _ablate("--grid", str(OMNIGAIA_GRID), "--out", str(tmp_path / "g"), "--dry-run")
    assert res.exit_code == 2
    report = json.loads(res.stdout[res.stdout.index("{"):])
    errors = [c["detail"] for c in report["checks"] if c["status"] == "error"]
    assert len(errors) == 2 and all("OD_PERCEPTION_LARGE_MODEL" in e for e in errors), errors
    assert {e.split(": ")[1] for e in errors} == {"cell qwen3-8b-base × omni-large", "cell qwen3-8b-sft × omni-large"}

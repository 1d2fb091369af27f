"""Write the static site: index.html (filters, pages, the reports' headline figures and plots), one page per run,
one side-by-side page per task that two sources share, and the assets. Everything is a local file; the pages
carry a Content-Security-Policy that lets the browser load nothing but this folder.

    DIR/index.html                       the run list (assets/runs.js holds its rows; assets/index.js filters them)
    DIR/run/<source>/<task>-s<n>.html    one run: context, needs grid, timeline, ending
    DIR/pairs/<task>-s<n>-<a>-<b>.html   the same task run by source a and source b
    DIR/assets/                          view.css, index.js, runs.js, plots/<source>/*.png, figures/*.png

    python -c "from omnidecision.view import write_view; print(write_view(['runs/eval-teacher'], 'runs/view'))"
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Any

import jinja2

from omnidecision.ledger.events import LedgerEvent
from omnidecision.protocol.records import run_key
from omnidecision.view.load import Collection, RunRecord, Source
from omnidecision.view.timeline import build, correct_label, digest_of, time_window

logger = logging.getLogger(__name__)

TEMPLATES = Path(__file__).resolve().parent / "templates"
STATIC = ("view.css", "index.js")
CLIP_CHARS = 12_000  # longest text shown on a page (observations, raw outputs); the rest is counted, not shown
ROW_FIELDS = ("href", "src", "task", "sample", "question", "level", "category", "outcome", "correct", "steps",
              "tools", "answer", "gold", "pairs")
FILTERS = (("planner", "planner"), ("outcome", "outcome"), ("correct", "judge"), ("level", "level"),
           ("category", "category"))


def clip(text: Any, limit: int = CLIP_CHARS) -> str:
    """`text` cut to `limit` characters, saying how many were left out.

    >>> clip("abcdef", 4)
    'abcd\\n… (2 more characters not shown)'
    """
    s = "" if text is None else str(text)
    return s if len(s) <= limit else s[:limit] + f"\n… ({len(s) - limit} more characters not shown)"


def short(text: str, limit: int) -> str:
    """`text` cut to `limit` characters with an ellipsis (the index's cells).

    >>> short("abcdef", 4)
    'abc…'
    """
    return text if len(text) <= limit else text[: limit - 1] + "…"


def event_line(event: LedgerEvent) -> str:
    """One event as `kind field=value …` (empty fields left out)."""
    data = event.model_dump(mode="json", exclude_none=True)
    kind = data.pop("kind", "?")
    parts = [f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in data.items() if v not in ([], {}, "")]
    return clip(f"{kind} " + " ".join(parts), 2000)


def slug(text: str, limit: int = 80) -> str:
    """A file-name-safe form of `text`; a hash suffix keeps distinct texts distinct when characters were replaced.

    >>> slug("syn-0-00003"), slug("a/b") != slug("a_b")
    ('syn-0-00003', True)
    """
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", text)[:limit].strip(".") or "run"
    if safe != text:
        safe += "-" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:8]
    return safe


def _pct(x: Any) -> str:
    return f"{100 * x:.1f}%" if isinstance(x, int | float) else "—"


def _num(x: Any, fmt: str = ".2f") -> str:
    return format(x, fmt) if isinstance(x, int | float) else "—"


def headline(report: dict[str, Any]) -> list[tuple[str, str]]:
    """The report's headline figures as (name, value) rows; a missing figure shows as —."""
    rows: list[tuple[str, str]] = []
    ci = report.get("ci95") or [None, None]
    rows.append(("accuracy", f"{_pct(report.get('accuracy'))} ({report.get('correct', '?')}/{report.get('n', '?')}), "
                             f"95% CI [{_pct(ci[0])}, {_pct(ci[1])}]"))
    outcomes = report.get("outcomes") or {}
    rows.append(("outcomes", ", ".join(f"{k} {v}" for k, v in outcomes.items() if v) or "—"))
    rows.append(("judge failures", str(report.get("judge_failures", "—"))))
    closure = report.get("need_closure_rate") or {}
    if any(v is not None for v in closure.values()):
        rows.append(("need closure", f"all {_pct(closure.get('all'))}, correct runs {_pct(closure.get('correct'))}, "
                                     f"incorrect runs {_pct(closure.get('incorrect'))}"))
    tools = report.get("tool_calls_per_question") or {}
    if tools:
        per = ", ".join(f"{k} {_num(v)}" for k, v in tools.items() if k != "total")
        rows.append(("tool calls / question", f"{_num(tools.get('total'))} ({per})"))
    rows.append(("planner steps / question", _num(report.get("planner_steps_per_question"))))
    rows.append(("invalid planner actions", _pct(report.get("invalid_action_rate"))))
    tokens = report.get("tokens_per_question") or {}
    if tokens:
        rows.append(("tokens / question", f"{_num(tokens.get('total'), ',.0f')} "
                                          f"(planner prompt {_num(tokens.get('planner_prompt'), ',.0f')})"))
    wall = report.get("wall_time") or {}
    if wall.get("per_question_mean_s") is not None:
        rows.append(("wall time / question", f"{_num(wall.get('per_question_mean_s'))} s"))
    budgets = report.get("budgets") or {}
    if budgets:
        rows.append(("budgets", ", ".join(f"{k} {v}" for k, v in budgets.items() if v is not None) or "—"))
    return rows


def environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(clip=clip, event_line=event_line, time_window=time_window)
    return env


@dataclass
class _Page:
    source: int
    record: RunRecord
    path: str  # relative to the site root


def _pairs(sources: list[Source], pages: dict[tuple[int, str, int], _Page]) -> dict[tuple[int, int, str, int], str]:
    """(a, b, task_id, sample) → pair page path, for every two sources that ran the same task and sample."""
    out: dict[tuple[int, int, str, int], str] = {}
    keys = [{run_key(r) for r in s.records} for s in sources]
    for a, b in combinations(range(len(sources)), 2):
        for task, sample in sorted(keys[a] & keys[b]):
            out[(a, b, task, sample)] = f"pairs/{slug(task)}-s{sample}-{a}-{b}.html"
    return out


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, "utf-8")


def write_site(collection: Collection, out: str | Path, *, title: str = "omnidecision runs",
               figures: Sequence[Path] = (), pages: bool = True) -> Path:
    """Render `collection` into the folder `out` (created; files of an earlier view there are overwritten).
    `figures` (PNG files, e.g. a run's forest plot of its planned contrasts) head the index; `pages=False` rewrites
    only the index and its assets, for a figure that exists only once the view's run pages were written.
    Returns the path of index.html."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    env = environment()
    sources = collection.sources
    # -- assets and plots
    assets = out / "assets"
    assets.mkdir(exist_ok=True)
    for name in STATIC:
        shutil.copyfile(TEMPLATES / name, assets / name)
    shown = []
    for f in figures:
        rel = f"assets/figures/{slug(f.name)}"
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(f, out / rel)
        shown.append({"href": rel, "name": f.stem})
    cards = []
    for i, s in enumerate(sources):
        plots = []
        for p in s.plots:
            rel = f"assets/plots/{i}/{p.name}"
            (out / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(p, out / rel)
            plots.append({"href": rel, "name": p.stem})
        cards.append({"label": s.label, "path_label": str(s.path), "n": len(s.records), "mode": s.mode,
                      "model": s.model, "headline": headline(s.report) if s.report else [], "plots": plots})
    # -- page paths, then the side-by-side pages
    run_pages = {(i, *run_key(r)): _Page(i, r, f"run/{i}/{slug(run_key(r)[0])}-s{r.sample}.html")
                 for i, s in enumerate(sources) for r in s.records}
    pairs = _pairs(sources, run_pages)
    partners: dict[tuple[int, str, int], list[tuple[int, str]]] = {}
    for (a, b, task, sample), rel in pairs.items():
        partners.setdefault((a, task, sample), []).append((b, rel))
        partners.setdefault((b, task, sample), []).append((a, rel))
    # -- one page per run (the run's view is built once and reused by its side-by-side pages)
    run_tpl, pair_tpl = env.get_template("run.html"), env.get_template("pair.html")
    views: dict[tuple[int, str, int], Any] = {}
    rows: list[list[Any]] = []
    for key, page in run_pages.items():
        i, r = page.source, page.record
        if pages:
            view = build(r)
            if key in partners:
                views[key] = view
            links = [(sources[j].label, "../../" + rel) for j, rel in partners.get(key, [])]
            html = run_tpl.render(title=f"{r.task_id} · {sources[i].label}", root="../../", view=view,
                                  source=sources[i], source_index=i, pairs=links,
                                  file_label=", ".join(str(f) for f in sources[i].files),
                                  first_digest=digest_of(r.steps[0]) if r.steps else "")
            _write(out / page.path, html)
        rows.append([page.path, i, r.task_id, r.sample, short(r.question, 200), r.level, r.category, r.outcome,
                     correct_label(r), len(r.steps), sum(r.totals.tool_calls.values()), short(r.answer or "", 80),
                     short(r.gold_answer or "", 80), [[j, rel] for j, rel in partners.get(key, [])]])
    for (a, b, task, sample), rel in pairs.items() if pages else ():
        sides = [{"label": sources[k].label, "view": views[(k, task, sample)],
                  "href": "../" + run_pages[(k, task, sample)].path} for k in (a, b)]
        _write(out / rel, pair_tpl.render(title=f"{task}: {sources[a].label} vs {sources[b].label}", root="../",
                                          sides=sides))
    # -- the index and its data
    data = {"sources": [{"label": s.label, "mode": s.mode, "model": s.model} for s in sources],
            "fields": list(ROW_FIELDS), "rows": rows}
    (assets / "runs.js").write_text("window.OMNI_VIEW = " + json.dumps(data, ensure_ascii=False, separators=(",", ":"))
                                    + ";\n", "utf-8")
    index = out / "index.html"
    _write(index, env.get_template("index.html").render(
        title=title, root="", sources=cards, figures=shown, problems=collection.problems, n_runs=len(rows),
        n_pairs=len(pairs), filters=FILTERS))
    logger.info("view: %d runs, %d side-by-side pages, %d problems → %s", len(rows), len(pairs),
                len(collection.problems), index)
    return index

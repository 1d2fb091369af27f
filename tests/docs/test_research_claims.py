"""Every sentence of the research record that states a comparison with its interval is a contrast of a result file.

A comparison written as `a − b [at N = n] +0.019 [−0.099, +0.136]` on a page under docs/ (outside a figures block,
which tests/docs/test_research_figures.py checks) must be, figure for figure, a contrast (`estimate`, `low`, `high`)
that some file under docs/results/ holds. The readings whose files git keeps but docs/results/ no longer does are
named below with the commit that holds them. The seven over-claims a review found in the current readings stay
fixed: the phrases are gone, and the sentences that replaced them cite their contrasts.

    pytest -q tests/docs/test_research_claims.py
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted(p for p in (ROOT / "docs").rglob("*.md") if "reference" not in p.relative_to(ROOT / "docs").parts)
FIGURES = re.compile(r"<!-- (figures|experiment-tables):begin.*?:end -->", re.S)
# a − b, up to 60 characters that name no other figure (e.g. "at N = 15, is"), the estimate and its interval
CLAIM = re.compile(r"([\w.]+) − ([\w.]+)[^\[\]\n]{0,60}?([+−-]\d\.\d{3}) \[([+−-]?\d\.\d{3}), ([+−-]?\d\.\d{3})\]")
# readings whose result files git keeps (docs/results/ dropped them): page → the commit and file, with why
HISTORICAL = {
    "docs/research/archive.md": "superseded readings: each entry names the commit whose tree holds its result file",
    "docs/research/nine-starts.md": "the 5-start pool's contrasts: docs/results/experiment-5starts.json at 8ae27ed",
}
CURRENT = ["docs/research/index.md", "docs/research/teacher-curve.md", "docs/research/teacher-curve-result.md",
           "docs/research/grounded-rewards.md", "docs/results.md", "docs/grounding.md", "docs/research/sft-sized.md",
           "docs/research/sft-sized-result.md"]
# what the review found the current readings said beyond their files, and what they must not say again
OVERCLAIMS = ["gains as much as", "gained as much", "null from N = 60", "clear null", "halves the teacher bill",
              "about twice", "could not have certified", "Issue ", "issue's goal"]


def _figure(x: str) -> str:
    x = x.replace("−", "-")
    return x if x[0] in "+-" else "+" + x


def result_contrasts() -> set[tuple[str, str, str]]:
    """(estimate, low, high) as a page prints them, of every interval in every result file."""
    found: set[tuple[str, str, str]] = set()

    def walk(o: Any) -> None:
        if isinstance(o, dict):
            if all(isinstance(o.get(k), int | float) and not isinstance(o.get(k), bool)
                   for k in ("estimate", "low", "high")):
                found.add((f"{o['estimate']:+.3f}", f"{o['low']:+.3f}", f"{o['high']:+.3f}"))
            for v in o.values():
                walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)

    for f in sorted((ROOT / "docs" / "results").rglob("*.json")):
        walk(json.loads(f.read_text("utf-8")))
    return found


def claims(text: str) -> list[tuple[str, tuple[str, str, str]]]:
    """Each comparison with an interval in `text` (figures blocks left out), with its figures as a file's."""
    prose = " ".join(FIGURES.sub("", text).split())
    return [(m[0], (_figure(m[3]), _figure(m[4]), _figure(m[5]))) for m in CLAIM.finditer(prose)]


def test_every_stated_comparison_is_a_contrast_of_a_result_file():
    known = result_contrasts()
    checked, missing = 0, []
    for page in PAGES:
        rel = page.relative_to(ROOT).as_posix()
        for sentence, figures in claims(page.read_text("utf-8")):
            checked += 1
            if figures not in known and rel not in HISTORICAL:
                missing.append(f"{rel}: {sentence}")
    assert checked >= 25, checked  # the pattern still reads the pages
    assert not missing, "comparisons no result file under docs/results/ holds:\n" + "\n".join(missing)


INTERVAL = re.compile(r"([+−-]?\d\.\d{3}) \[([+−-]?\d\.\d{3}), ([+−-]?\d\.\d{3})\]")


def test_every_interval_in_the_prose_is_a_result_files():
    """Wider than the comparisons: every `x [low, high]` figure a page writes outside its figures blocks (a mean, or
    the second and later contrasts of a list) is an interval some result file holds."""
    known, checked, missing = result_contrasts(), 0, []
    for page in PAGES:
        rel = page.relative_to(ROOT).as_posix()
        prose = " ".join(FIGURES.sub("", page.read_text("utf-8")).split())
        for m in INTERVAL.finditer(prose):
            checked += 1
            if (_figure(m[1]), _figure(m[2]), _figure(m[3])) not in known and rel not in HISTORICAL:
                missing.append(f"{rel}: …{prose[max(0, m.start() - 60):m.end()]}")
    assert checked >= 80, checked
    assert not missing, "intervals no result file under docs/results/ holds:\n" + "\n".join(missing)


def test_a_comparison_no_file_holds_is_caught():
    known = result_contrasts()
    [(_, good)] = claims("grpo_own − grpo_judge at N = 15 is +0.019 [−0.099, +0.136] (exploratory).")
    [(_, bad)] = claims("grpo_own − grpo_judge at N = 15 is +0.029 [−0.099, +0.136] (exploratory).")
    assert good in known and bad not in known


def test_the_current_readings_say_no_more_than_their_files():
    for rel in CURRENT:
        text = " ".join((ROOT / rel).read_text("utf-8").split())
        found = [phrase for phrase in OVERCLAIMS if phrase in text]
        assert not found, f"{rel}: {found}"
    curve = " ".join((ROOT / "docs/research/teacher-curve.md").read_text("utf-8").split())
    index = " ".join((ROOT / "docs/research/index.md").read_text("utf-8").split())
    grounded = " ".join((ROOT / "docs/research/grounded-rewards.md").read_text("utf-8").split())
    # 1. grpo_own against grpo_judge is their contrast, not a ratio of point estimates
    assert "grpo_own − grpo_judge at N = 15, is +0.019 [−0.099, +0.136]" in curve
    assert "grpo_own − grpo_judge at N = 15: +0.019 [−0.099, +0.136]" in index
    # 2. N = 60 is small and unresolved, bounded only at N = 240
    assert "small and unresolved" in curve and "small and unresolved at N = 60" in index
    # 3. the closest "RL at N against SFT at 2N" is an interval whose start deltas change sign
    assert "+0.020 [−0.387, +0.428], and its start deltas change sign" in curve
    # 4. equal step times, a ratio of unresolved gains
    for rel in ("docs/research/index.md", "docs/results.md", "docs/grounding.md"):
        assert "58.9 s against 61.1 s per replicate" in " ".join((ROOT / rel).read_text("utf-8").split()), rel
    # 5. unlikely, not impossible
    assert "was unlikely to certify a match" in curve and "reached ±0.042" in curve
    # 6. best-of-K SFT and the RL-specific planned contrasts are read
    assert "Best-of-K SFT gets most of the post-SFT gain" in curve
    assert "grpo_judge − rft +0.058 [−0.154, +0.271]" in curve
    assert "grpo_own − rft_own +0.111 [−0.183, +0.405]" in curve
    # 7. the checkpoint policy's choice of the SFT start, and the grounded start deltas
    assert "The checkpoint policy often kept the SFT start" in curve
    assert "The start deltas lean towards the proxy" in grounded
    assert "0.000, −0.083, −0.047, −0.019, +0.003" in grounded


def test_the_seven_figures_are_the_files():
    """The figures the seven fixes quote are the result files' (contrasts, step times, kept starts)."""
    curve = json.loads((ROOT / "docs/results/teacher-curve.json").read_text("utf-8"))
    grounded = json.loads((ROOT / "docs/results/grounded.json").read_text("utf-8"))["by_n"]["30"]
    c = curve["by_n"]["15"]["contrasts"]["exploratory"]["grpo_own-grpo_judge"]
    assert (round(c["estimate"], 3), round(c["low"], 3), round(c["high"], 3)) == (0.019, -0.099, 0.136)
    assert round(curve["headline"]["by_n"]["60"]["contrasts"]["grpo_own"]["half_width"], 3) == 0.042
    per15, per30 = curve["by_n"]["15"]["per_seed_accuracy"], curve["by_n"]["30"]["per_seed_accuracy"]
    deltas = [a - b for a, b in zip(per15["grpo_own"], per30["sft"], strict=True)]
    assert min(deltas) < 0 < max(deltas)  # the start deltas change sign
    costs = grounded["arm_cost"]["arms"]
    assert (costs["grpo_exec"]["step_s"], costs["grpo_judge"]["step_s"]) == (58.9, 61.1)
    assert [costs[a]["kept_start"] for a in ("grpo_judge", "grpo_exec", "rft")] == ["3/18", "4/18", "8/18"]
    per = grounded["per_seed_accuracy"]
    assert [f"{a - b:+.3f}" for a, b in zip(per["grpo_exec"], per["grpo_judge"], strict=True)] == \
        ["+0.000", "-0.083", "-0.047", "-0.019", "+0.003", "-0.011"]
    n30 = curve["by_n"]["30"]["per_replicate_accuracy"]
    assert all(set(n30[arm]["0"].values()) == set(n30["sft"]["0"].values()) for arm in ("rft", "grpo_judge",
                                                                                           "grpo_exec"))

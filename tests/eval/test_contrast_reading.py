"""The experiment's reading: `contrast_table_md` (planned contrasts with their intervals and what a null one
excludes, exploratory ones Holm-adjusted and marked) and `forest_plot` (a PNG), from real `hierarchical_contrast`
results on small data.

    pytest -q tests/eval/test_contrast_reading.py
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from omnidecision.eval.contrasts import contrast_table_md
from omnidecision.eval.plots import forest_plot
from omnidecision.stats import ContrastEstimate, hierarchical_contrast


def _arm(rng: np.random.Generator, p: float, reps: list[str], starts: int = 2, tasks: int = 40):
    return {str(s): {r: {f"t{t}": float(rng.random() < p) for t in range(tasks)} for r in reps}
            for s in range(starts)}


@pytest.fixture(scope="module")
def contrasts() -> dict[str, ContrastEstimate]:
    rng = np.random.default_rng(7)
    rl = ["rl0", "rl1", "rl2"]
    good, same, sft = _arm(rng, 0.9, rl), _arm(rng, 0.5, rl), _arm(rng, 0.5, ["sft"])
    return {"good − sft": hierarchical_contrast(good, sft), "same − sft": hierarchical_contrast(same, sft),
            "good − same": hierarchical_contrast(good, same), "one start": hierarchical_contrast(
                {"0": good["0"]}, {"0": sft["0"]})}


def _fmt(c: ContrastEstimate) -> str:
    return f"| {c.estimate:+.3f} | [{c.low:+.3f}, {c.high:+.3f}] | {c.half_width:.3f} |"


def test_table_planned_and_exploratory(contrasts: dict[str, ContrastEstimate]) -> None:
    good, same = contrasts["good − sft"], contrasts["same − sft"]
    assert good.low > 0 and same.low <= 0 <= same.high  # the data make one contrast clear and one null
    exploratory = {"good − same": contrasts["good − same"], "one start": contrasts["one start"]}
    md = contrast_table_md({"good − sft": good, "same − sft": same}, exploratory)
    planned_part, exploratory_part = md.split("Exploratory contrasts")
    assert f"| good − sft {_fmt(good)}" in planned_part and f"| same − sft {_fmt(same)}" in planned_part
    assert "95% CI" in planned_part
    # the null planned contrast says what it excludes: max(|low|, |high|)
    excl = max(abs(same.low), abs(same.high))
    assert f"- same − sft: the interval covers 0; the experiment excludes |Δ| > {excl:.3f}" in planned_part
    assert "- good − sft: the interval excludes 0 (Δ > 0)." in planned_part
    assert "(exploratory)" not in planned_part
    # Holm over the 2 exploratory p-values, by hand: the smaller doubled, the larger max(that, itself)
    (n1, p1), (n2, p2) = sorted(((n, c.p_value) for n, c in exploratory.items()), key=lambda x: x[1])
    holm_p = {n1: min(1.0, 2 * p1), n2: min(1.0, max(2 * p1, p2))}
    for name, c in exploratory.items():
        assert f"| {name} (exploratory) {_fmt(c)} {c.p_value:.3g} | {holm_p[name]:.3g} |" in exploratory_part
    assert "over these 2" in exploratory_part
    # the one-start contrast's note (start level not counted) is carried into the table's notes
    assert "- one start: one start: the variance between SFT starts cannot be estimated" in md


def test_table_rejects_mixed_levels(contrasts: dict[str, ContrastEstimate]) -> None:
    other = contrasts["good − sft"].model_copy(update={"level": 0.9})
    with pytest.raises(ValueError, match="different interval levels"):
        contrast_table_md({"a": contrasts["same − sft"]}, {"b": other})


@pytest.mark.requires("matplotlib")  # the `report` extra
def test_forest_plot_writes_a_png(tmp_path: Path, contrasts: dict[str, ContrastEstimate]) -> None:
    import matplotlib.image

    path = forest_plot(contrasts, tmp_path / "sub" / "forest.png")
    assert path == tmp_path / "sub" / "forest.png"
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    img = matplotlib.image.imread(path)
    assert img.shape[0] > img.shape[1] / 4  # four rows: taller than a single strip
    assert (img[..., :3].max(axis=-1) < 0.2).mean() > 0.001  # the black intervals and labels are drawn
    with pytest.raises(ValueError, match="no contrast"):
        forest_plot({}, tmp_path / "empty.png")

"""The experiment's reading from real `hierarchical_contrast` results on small data: the contrast table
(`omnidecision.pipeline.experiment.contrast_rows` of `pipeline.contrasts.contrast_section`: planned rows with what a
null one excludes, exploratory rows Holm-adjusted) and `forest_plot` (a PNG).

    pytest -q tests/eval/test_forest_plot.py
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

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


def test_contrast_rows_planned_and_exploratory() -> None:
    from omnidecision.pipeline.contrasts import contrast_section
    from omnidecision.pipeline.experiment import contrast_rows

    rng = np.random.default_rng(7)
    rl = ["rl0", "rl1", "rl2"]
    good_o, same_o, sft_o = _arm(rng, 0.9, rl), _arm(rng, 0.5, rl), _arm(rng, 0.5, ["sft"])  # the fixture's draws
    arms = {"sft": sft_o, "good": good_o, "same": same_o}
    section = contrast_section(arms, [("sft", "good"), ("sft", "same")], [("same", "good")], n_boot=200)
    rows = contrast_rows(section)
    good, same = section["planned"]["good-sft"], section["planned"]["same-sft"]
    assert good["low"] > 0 and same["low"] <= 0 <= same["high"]  # the data make one contrast clear and one null
    row = next(r for r in rows if r.startswith("| same-sft |"))
    # the null planned contrast says what it excludes: max(|low|, |high|)
    assert f"| ±{max(abs(same['low']), abs(same['high'])):.3f} |" in row
    assert f"| {same['estimate']:+.3f} | [{same['low']:+.3f}, {same['high']:+.3f}] | {same['half_width']:.3f} |" in row
    # one exploratory pair: Holm leaves its p as it is
    (explore,) = section["exploratory"].values()
    assert explore["p_holm"] == pytest.approx(explore["p_value"])
    assert rows.index("Exploratory (every other pair; Holm-adjusted p):") > rows.index(row)
    assert f"| good-same | {explore['estimate']:+.3f} |" in rows[-1]


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

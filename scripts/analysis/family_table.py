"""Accuracy per task family of several evaluation folders (their report.json), as a markdown table and a JSON file.

    python scripts/analysis/family_table.py k1=runs/switch-copies/k1-probe k4=runs/switch-copies/k4-probe \
        --out docs/results/switch-copies-probe.json

Where the evaluated planner's training run can be found (the eval's recipe.yaml names the planner folder, whose
provenance.json names the run's output_dir), the row "best_dev_loss" holds that run's best eval loss: the figure a
choice among SFT seeds could be made on without the test suite.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import yaml


def family_counts(folder: Path) -> dict[str, list[int]]:
    """{family: [correct, n]} of one `omnidecision eval` output folder, plus "all"."""
    report = json.loads((folder / "report.json").read_text("utf-8"))
    out = {fam: [row["correct"], row["n"]] for fam, row in sorted(report["by_category"].items())}
    out["all"] = [report["correct"], report["n"]]
    return out


def best_dev_loss(folder: Path) -> float | None:
    """The best eval loss of the training run behind the planner `folder` evaluated, or None when it is not found."""
    recipe = yaml.safe_load((folder / "recipe.yaml").read_text("utf-8")) if (folder / "recipe.yaml").exists() else {}
    model = Path(str(((recipe or {}).get("backends") or {}).get("planner", {}).get("model") or ""))
    prov = model / "provenance.json"
    if not model.name or not prov.exists():
        return None
    from omnidecision.export import run_info  # the run's log history, as export reads it

    run = Path(json.loads(prov.read_text("utf-8")).get("output_dir", ""))
    losses = [row["eval_loss"] for row in run_info(run)[1] if "eval_loss" in row] if run.is_dir() else []
    return round(min(losses), 4) if losses else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", help="LABEL=EVAL_FOLDER")
    ap.add_argument("--out", type=Path, help="write {label: {family: [correct, n]}} here")
    args = ap.parse_args()
    pairs = [r.split("=", 1) for r in args.runs]
    if any(len(p) != 2 for p in pairs):
        ap.error("each run is LABEL=EVAL_FOLDER")
    table: dict[str, dict] = {label: family_counts(Path(folder)) for label, folder in pairs}
    losses = {label: best_dev_loss(Path(folder)) for label, folder in pairs}
    for label, loss in losses.items():
        if loss is not None:
            table[label]["best_dev_loss"] = loss
    families = sorted({f for counts in table.values() for f in counts if f not in ("all", "best_dev_loss")}) + ["all"]
    print("| family | " + " | ".join(table) + " |")
    print("|---|" + "---|" * len(table))
    for fam in families:
        cells = [f"{c[fam][0]}/{c[fam][1]}" if fam in c else "-" for c in table.values()]
        print(f"| {fam} | " + " | ".join(cells) + " |")
    if any(loss is not None for loss in losses.values()):
        print("| best dev loss | " + " | ".join("-" if v is None else f"{v:.4f}" for v in losses.values()) + " |")
    if args.out:
        args.out.write_text(json.dumps(table, indent=1) + "\n", "utf-8")


if __name__ == "__main__":
    main()

"""Accuracy per task family of several evaluation folders (their report.json), as a markdown table and a JSON file.

    python scripts/family_table.py k1=runs/switch-copies/k1-probe k4=runs/switch-copies/k4-probe \
        --out docs/results/switch-copies-probe.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def family_counts(folder: Path) -> dict[str, list[int]]:
    """{family: [correct, n]} of one `omnidecision eval` output folder, plus "all"."""
    report = json.loads((folder / "report.json").read_text("utf-8"))
    out = {fam: [row["correct"], row["n"]] for fam, row in sorted(report["by_category"].items())}
    out["all"] = [report["correct"], report["n"]]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", help="LABEL=EVAL_FOLDER")
    ap.add_argument("--out", type=Path, help="write {label: {family: [correct, n]}} here")
    args = ap.parse_args()
    pairs = [r.split("=", 1) for r in args.runs]
    if any(len(p) != 2 for p in pairs):
        ap.error("each run is LABEL=EVAL_FOLDER")
    table = {label: family_counts(Path(folder)) for label, folder in pairs}
    families = sorted({f for counts in table.values() for f in counts if f != "all"}) + ["all"]
    print("| family | " + " | ".join(table) + " |")
    print("|---|" + "---|" * len(table))
    for fam in families:
        cells = [f"{c[fam][0]}/{c[fam][1]}" if fam in c else "-" for c in table.values()]
        print(f"| {fam} | " + " | ".join(cells) + " |")
    if args.out:
        args.out.write_text(json.dumps(table, indent=1) + "\n", "utf-8")


if __name__ == "__main__":
    main()

"""The reward audit's report: `audit.json` (every candidate and every metric), `audit.md` (the tables) and
`audit.png` (within-group rank correlation and top-1 agreement of each proxy, per kind of group).

    python -m omnidecision.grounding.report runs/audit/audit.json     # rewrite audit.md and audit.png from the JSON
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def _f(v: Any, fmt: str = "{:.3f}") -> str:
    return "–" if v is None else fmt.format(v)


def overall_rows(metrics: dict[str, Any]) -> list[str]:
    rows = ["| proxy | candidates | AUROC | within-group Spearman (groups) | flat groups | top-1 agreement | ECE |",
            "|---|---|---|---|---|---|---|"]
    for proxy, m in metrics.items():
        if not m.get("n"):
            rows.append(f"| {proxy} | 0 | – | – | – | – | – |")
            continue
        rows.append(f"| {proxy} | {m['n']} | {_f(m['auroc'])} | {_f(m['within_group_spearman'], '{:+.3f}')} "
                    f"({m['spearman_groups']}) | {m['flat_groups']} | {_f(m['top1_agreement'])} | "
                    f"{_f(m['calibration']['ece'])} |")
    return rows


def breakdown_rows(section: dict[str, dict[str, Any]], proxies: list[str], label: str) -> list[str]:
    rows = [f"| {label} | " + " | ".join(proxies) + " |", "|---|" + "---|" * len(proxies)]
    for key, by_proxy in section.items():
        cells = [f"{_f(by_proxy[p].get('within_group_spearman'), '{:+.2f}')} / "
                 f"{_f(by_proxy[p].get('top1_agreement'), '{:.2f}')}" for p in proxies]
        rows.append(f"| {key} | " + " | ".join(cells) + " |")
    return rows


def render(report: dict[str, Any]) -> str:
    m = report["metrics"]
    proxies = list(m["overall"])
    cost = report.get("cost", {})
    lines = ["# Reward audit: the proxies against executed returns", "",
             f"States: {report['states']}, candidates per state: {report['k']}, continuations per candidate: "
             f"{report['continuations']}, continuation policy: `{report['policy']}`. Groups by what their candidates "
             f"differ in: {m['group_kinds']}.", "",
             "An executed return is the mean judged outcome of the candidate's continuations (1 correct). "
             "Within-group Spearman is what GRPO's group advantage reads; a flat group is one where the outcome "
             "varies but the proxy scores every candidate the same.", "", *overall_rows(m["overall"]), "",
             "## By kind of group (within-group Spearman / top-1 agreement)", "",
             *breakdown_rows(m["by_group_kind"], proxies, "group kind"), "",
             "## By family (within-group Spearman / top-1 agreement)", "",
             *breakdown_rows(m["by_family"], proxies, "family"), ""]
    if cost:
        lines += ["## Cost of the executed returns", "",
                  f"CPU {cost.get('cpu_s', 0):.1f} s, {cost.get('executions', 0)} executions "
                  f"({cost.get('cached', 0)} from the cache), {cost.get('tool_calls', 0)} tool calls, "
                  f"{cost.get('tokens', 0)} tokens, priced {cost.get('usd')} USD ({cost.get('price_note', '')}).", ""]
    return "\n".join(lines)


def plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    section = {"all": report["metrics"]["overall"], **report["metrics"]["by_group_kind"]}
    proxies = list(report["metrics"]["overall"])
    fig, axes = plt.subplots(1, 2, figsize=(11, 0.45 * len(proxies) + 1.8), sharey=True)
    for ax, key, title in ((axes[0], "within_group_spearman", "within-group Spearman"),
                           (axes[1], "top1_agreement", "top-1 agreement")):
        height = 0.8 / len(section)
        for j, (kind, by_proxy) in enumerate(section.items()):
            ys = [i + j * height for i in range(len(proxies))]
            vals = [by_proxy.get(p, {}).get(key) or 0.0 for p in proxies]
            ax.barh(ys, vals, height=height, label=kind)
        ax.set_yticks([i + 0.4 - height / 2 for i in range(len(proxies))], proxies)
        ax.axvline(0, color="black", lw=0.8)
        ax.set_title(title)
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_report(report: dict[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "audit.json").write_text(json.dumps(report, indent=2), "utf-8")
    (out / "audit.md").write_text(render(report), "utf-8")
    plot(report, out / "audit.png")


if __name__ == "__main__":
    src = Path(sys.argv[1])
    data = json.loads(src.read_text("utf-8"))
    (src.parent / "audit.md").write_text(render(data), "utf-8")
    plot(data, src.parent / "audit.png")

"""docs/guide/recipes-explained.md shows each recipe's values as the recipe file has them: under each heading that
names a recipe (`## ...: `configs/...yaml``), every table row's field and value are that file's.

    pytest -q tests/docs/test_recipes_page.py
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "guide" / "recipes-explained.md"
SECTION = re.compile(r"^## [^\n]*`(configs/[^`]+\.yaml)`\n(.*?)(?=^## |\Z)", re.S | re.M)
ROW = re.compile(r"^\| `(\w+)` \| ([^|]+) \|", re.M)


def sections() -> list[tuple[str, list[tuple[str, str]]]]:
    return [(recipe, ROW.findall(body)) for recipe, body in SECTION.findall(PAGE.read_text("utf-8"))]


def test_every_value_on_the_page_is_the_recipes():
    found = sections()
    assert {r for r, _ in found} >= {"configs/grpo/qwen3-8b-lora-vllm-server.yaml",
                                     "configs/grpo/qwen3-8b-vllm-colocate.yaml", "configs/sft/qwen3-8b-lora.yaml",
                                     "configs/sft/qwen3-32b-full-zero3.yaml"}
    wrong = []
    for recipe, rows in found:
        values = yaml.safe_load((ROOT / recipe).read_text("utf-8"))
        assert rows, recipe
        for field, shown in rows:
            if field not in values or yaml.safe_load(shown.strip()) != values[field]:
                wrong.append(f"{recipe}: {field} shown {shown.strip()!r}, recipe {values.get(field, 'missing')!r}")
    assert not wrong, "\n".join(wrong)


def test_the_grpo_hyperparameters_are_explained():
    rows = dict(sections()[0][1])
    for field in ("loss_type", "beta", "num_generations", "epsilon_high", "steps_per_generation"):
        assert field in rows, field

"""Write the generated reference pages into docs/reference/; exit 1 naming every undocumented command, option or
field (the build fails with it).

    python -m docgen [--out docs] [--check]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from docgen.build import generate

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=ROOT / "docs", help="the docs folder (pages go to OUT/reference/)")
    p.add_argument("--check", action="store_true", help="only check that everything is documented; write nothing")
    a = p.parse_args(argv)
    pages, problems = generate(None if a.check else a.out)
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    if problems:
        print(f"docgen: {len(problems)} undocumented item(s): add the doc string in the code", file=sys.stderr)
        return 1
    print(f"docgen: {len(pages)} reference pages" + ("" if a.check else f" written to {a.out / 'reference'}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())

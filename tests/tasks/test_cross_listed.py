"""A need's wording does not predict its listed tool (`synth.P_CROSS_LISTED`): audio-worded and subtitle-worded
hops list either source, the one whose file holds the value, in the ordinary families as in the planning ones; in
source_switch the switching need lists either source, and the other one (which holds the value) as `alt`.
A planner therefore has to read `tool=` (and `tried=`/`alt=`) on the need's digest line
(docs/research/source-switch.md, "Why oracle_sft failed source_switch")."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from omnidecision.tasks.schema import GoldNeed, Task
from omnidecision.tasks.synth import load_suite, write_suite

MEDIA = ("audio", "subtitle")


@pytest.fixture(scope="module")
def suite(tmp_path_factory) -> list[Task]:
    out: Path = tmp_path_factory.mktemp("cross300")
    write_suite(300, 21, out)
    return load_suite(out)


def _wording(need: GoldNeed) -> str | None:
    """The source the need's wording names: an audio hop's focus is "<sound> name", a subtitle hop's "<x> guest"."""
    if need.preferred_source not in MEDIA:
        return None
    focus = need.query_focus
    return "audio" if focus.endswith(" name") else "subtitle" if focus.endswith(" guest") else None


def _files(t: Task) -> dict[str, str]:
    asset = t.assets[0]
    return {"subtitle": t.resolve(asset.subtitles).read_text(), "audio": t.resolve(asset.transcript).read_text()}


def test_the_wording_of_a_media_need_does_not_predict_its_listed_source(suite):
    pairs = Counter()  # (family kind, wording, listed)
    for t in suite:
        kind = "switch" if t.category == "source_switch" else "other"
        for need in t.gold.needs:
            if (w := _wording(need)) is not None:
                pairs[kind, w, need.preferred_source] += 1
    for kind in ("other", "switch"):
        for w in MEDIA:
            both = [pairs[kind, w, s] for s in MEDIA]
            # each wording lists each source in a fair share of its needs: wording alone gets at most ~70% right
            assert min(both) >= 0.3 * sum(both) and sum(both) >= 20, (kind, w, pairs)


def test_the_listed_source_holds_the_value_unless_the_need_is_the_switch(suite):
    switches = Counter()
    for t in suite:
        files = _files(t)
        for need in t.gold.needs:
            if _wording(need) is None or need.value is None:
                continue
            value = rf"\b{re.escape(need.value)}\b"
            if need.alt_sources:  # the switch: the listed source lacks the value, the alt source holds it
                assert t.category == "source_switch", (t.id, need)
                (alt,) = need.alt_sources
                assert alt != need.preferred_source and re.search(value, files[alt]), (t.id, need)
                if _wording(need) == "subtitle":  # a guest's name appears in no other cue
                    assert not re.search(value, files[need.preferred_source]), (t.id, need)
                switches[_wording(need), need.preferred_source] += 1
            else:
                assert re.search(value, files[need.preferred_source]), (t.id, need.description, need.preferred_source)
    # the switch goes both ways from either wording (the wording predicts neither the listed source nor the alt)
    assert set(switches) == {(w, s) for w in MEDIA for s in MEDIA}, switches
    assert sum(1 for t in suite if t.category == "source_switch") == sum(switches.values())

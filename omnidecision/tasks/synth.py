"""The synthetic closure suite: seeded multi-hop tasks across modalities that the scripted teacher can solve.

    omnidecision tasks synth --n 500 --seed 0 --out runs/synth

writes `DIR/tasks.jsonl` (one `Task` per line, `source="synthetic"`, paths relative to DIR), `DIR/assets/`
(per task an .srt of subtitles and a .vtt transcript; audio events and frame captions are inline in the asset)
and `DIR/corpus.jsonl` (the page corpus shared by all tasks, distractors included). The output is
byte-identical for a seed: one `random.Random` per task derived from (seed, index), no set or clock in it.

Task families (chain of hops; each hop is one gold need whose evidence holds the value verbatim and shares
keywords with the need's composed query):
- easy: audio → subtitle (text); subtitle → web (number/text); clip|frame → web (number/text/mcq)
- medium: audio → subtitle → web (number/text/mcq); clip|frame → web → code (number);
  two audio → subtitle branches (list)
- hard: two branches (audio → subtitle → web, clip|frame → web) joined by a computation (number)
An audio-worded or subtitle-worded hop (`spoken_hop`, `guest_hop`) keeps its value in the other source with
probability `P_CROSS_LISTED` (a name only captioned, an introduction only spoken), and its need then lists that
source: a need's wording does not predict its listed tool, so a planner has to read the digest line's
`sources=` (docs/research/source-switch.md, "Why oracle_sft failed source_switch").
Planning families (`PLANNING_FAMILIES`), where "the first actionable need with its listed tool" is wrong:
- source_switch: the listed source of one hop cannot answer (it lists audio or subtitles whatever its wording, and
  the value sits in the other); the need lists the source that can as `alt`, and the right call after the empty
  one switches to it;
- tight_budget: two supplementary needs come first, then a chain whose guest need unblocks two web facts joined
  by a computation; the task's tool budget (`max_tool_calls`, in the digest) covers exactly the chain;
- supplementary_finish: a supplementary need opens up right after the first hop; the budget covers only the
  blocking needs, and once they are filled finishing is right although a need is still actionable;
- conflict_second_source: two web pages disagree; searching again finds the same pair, and only the need's
  `alt` source (a plaque seen in the video) settles the conflict;
- compute_slot: the answer is a computation slot with no code need: once its input is filled no need is
  actionable, and the right call aims at the slot with code_executor before finishing.
Some web facts have a conflicting source (a forum page with a wrong value, `conflicting_value` in gold) that
an official registry page resolves; some tasks are unanswerable (a need no tool can fill: `answerable=False`).

    >>> tasks, corpus, files = generate(3, seed=1)
    >>> len(tasks), all(t.source == "synthetic" for t in tasks)
    (3, True)
"""

from __future__ import annotations

import json
import logging
import random
from dataclasses import dataclass, field
from pathlib import Path

from omnidecision.tasks import synth_text as tx
from omnidecision.tasks.schema import (
    Asset,
    AudioEvent,
    FrameCaption,
    GoldDecomposition,
    GoldNeed,
    GoldSlot,
    Page,
    Task,
)

logger = logging.getLogger(__name__)

# family -> (level, weight): the chains the rule "first actionable need, listed tool" solves
_CHAIN_FAMILIES: dict[str, tuple[str, float]] = {
    "audio_subtitle": ("easy", 0.06),
    "subtitle_web": ("easy", 0.06),
    "visual_web": ("easy", 0.06),
    "audio_subtitle_web": ("medium", 0.08),
    "visual_web_code": ("medium", 0.06),
    "two_audio_list": ("medium", 0.06),
    "hard_join": ("hard", 0.12),
}
# family -> level: the planning families, where the right decision is not "first actionable need, listed tool" (see
# the README); each is drawn with the same weight, together half of the suite
_PLANNING_LEVELS: dict[str, str] = {
    "source_switch": "medium",
    "tight_budget": "hard",
    "supplementary_finish": "medium",
    "conflict_second_source": "medium",
    "compute_slot": "medium",
}
_PLANNING_WEIGHT = 0.10
# one table, the planning names read from it (never listed twice); the order is the draw's, chains first
FAMILIES: dict[str, tuple[str, float]] = {
    **_CHAIN_FAMILIES, **{family: (level, _PLANNING_WEIGHT) for family, level in _PLANNING_LEVELS.items()}}
PLANNING_FAMILIES: tuple[str, ...] = tuple(_PLANNING_LEVELS)
SITES = ("encyclopedia.example.org", "people.example.net", "news.example.com", "archive.example.org")
P_CONFLICT = 0.3
P_UNANSWERABLE = 0.08
P_SUPPLEMENTARY = 0.25
# the share of audio- and subtitle-worded hops whose value sits in the other source, which the need then lists:
# a need's wording does not predict its listed tool, so a planner has to read `sources=`
P_CROSS_LISTED = 0.5


@dataclass
class _Build:
    """The per-task state while its hops are laid out."""

    tid: str
    rng: random.Random
    names: tx.Names
    duration: float
    needs: list[GoldNeed] = field(default_factory=list)
    subs: list[tuple[float, float, str]] = field(default_factory=list)
    speech: list[tuple[float, float, str]] = field(default_factory=list)
    events: list[AudioEvent] = field(default_factory=list)
    frames: list[FrameCaption] = field(default_factory=list)
    pages: list[Page] = field(default_factory=list)
    free_slots: list[int] = field(default_factory=list)
    sounds: list[str] = field(default_factory=list)
    visuals: list[tuple[str, str]] = field(default_factory=list)
    conflict: bool = False
    unanswerable: bool = False
    tool_budget: int | None = None  # the task's max_tool_calls (tight-budget families)

    def time(self) -> float:
        return float(self.free_slots.pop(self.rng.randrange(len(self.free_slots))) * 10 + 5)

    def sound(self) -> str:
        s = self.rng.choice([x for x in tx.SOUNDS if x not in self.sounds])
        self.sounds.append(s)
        return s

    def visual(self) -> tuple[str, str]:
        while True:
            v = (self.rng.choice(tx.COLORS), self.rng.choice(tx.OBJECTS))
            if all(v[1] != o for _, o in self.visuals):
                self.visuals.append(v)
                return v

    def add(self, need: GoldNeed) -> int:
        self.needs.append(need)
        return len(self.needs) - 1

    def url(self, title: str) -> str:
        slug = "-".join(title.lower().replace("'", "").split())
        return f"https://{self.rng.choice(SITES)}/{slug}-{self.tid}-{len(self.pages)}"

    def page(self, title: str, text: str, url: str | None = None) -> None:
        self.pages.append(Page(url=url or self.url(title), title=title, text=text))


# --- hops: each adds one need (and its evidence plus distractors); returns (need index, reference phrase) ----------


def audio_hop(b: _Build, captioned_only: bool = False, listed: str = "audio") -> tuple[int, str, str]:
    """A name spoken after a sound. `captioned_only`: the transcript misses it and only the subtitles (which
    caption sounds) carry it. `listed`: the need's preferred source; when it is not the source that holds the name,
    the holder is listed as `alt` (the listed source comes back without the name: a switch)."""
    sound, x, t = b.sound(), b.names.word(), b.time()
    b.events.append(AudioEvent(start=t, end=t + 2.0, label=sound))
    (b.subs if captioned_only else b.speech).append(
        (t + 0.5, t + 4.0, b.rng.choice(tx.AUDIO_CUES).format(sound=sound, x=x)))
    # a distractor moment: another sound, another name
    s2, y, t2 = b.sound(), b.names.word(), b.time()
    b.events.append(AudioEvent(start=t2, end=t2 + 2.0, label=s2))
    b.speech.append((t2 + 0.5, t2 + 4.0, b.rng.choice(tx.AUDIO_CUES).format(sound=s2, x=y)))
    ref = b.rng.choice(tx.AUDIO_DESC).format(sound=sound)
    holder = "subtitle" if captioned_only else "audio"
    i = b.add(GoldNeed(description=tx.cap(ref), query_focus=tx.AUDIO_FOCUS.format(sound=sound),
                       preferred_source=listed, value=x, asset_id="v0",
                       alt_sources=[holder] if holder != listed else []))
    b.subs.append((t2 + 1.0, t2 + 4.5, b.rng.choice(tx.SUB_CUES).format(x=y, p=b.names.person())))
    return i, ref, x


def subtitle_hop(b: _Build, anchor: int | None, anchor_word: str, anchor_ref: str, fillable: bool = True,
                 spoken_only: bool = False, listed: str = "subtitle") -> tuple[int, str, str | None]:
    """A guest introduced by the anchor. `spoken_only`: the introduction is in the speech transcript but not in
    the subtitles. `listed`: the need's preferred source; when it is not the source that holds the introduction,
    the holder is listed as `alt` (the listed source comes back without it: a switch)."""
    p = b.names.person()
    t = b.time()
    if fillable:
        cue = b.rng.choice(tx.SUB_CUES).format(x=anchor_word, p=p)
        (b.speech if spoken_only else b.subs).append((t, t + 3.5, cue))
    else:  # no cue names the anchor's guest: the need cannot be filled
        b.subs.append((t, t + 3.5, f"{anchor_word} waves at the audience and leaves without a word."))
    for k in range(7):  # other guests, introduced by other names (one with a confusable name)
        t2 = b.time()
        other = b.names.near(p) if k == 0 else b.names.person()
        b.subs.append((t2, t2 + 3.5, b.rng.choice(tx.SUB_CUES).format(x=b.names.word(), p=other)))
    ref = b.rng.choice(tx.SUB_DESC).format(ref=anchor_ref)
    focus = tx.SUB_FOCUS.format(anchor="{#%d}" % anchor if anchor is not None else anchor_word)
    holder = "audio" if spoken_only else "subtitle"
    i = b.add(GoldNeed(description=tx.cap(ref), query_focus=focus, preferred_source=listed,
                       depends_on=[anchor] if anchor is not None else [], value=p if fillable else None,
                       fillable=fillable, asset_id="v0", alt_sources=[holder] if holder != listed else []))
    return i, ref, p


def spoken_hop(b: _Build, switch: bool = False) -> tuple[int, str, str]:
    """An audio-worded hop whose name sits in the transcript or (`P_CROSS_LISTED`) only in the subtitles. The need
    lists the source that holds it, or with `switch` the other one (the holder then as `alt`)."""
    captioned = b.rng.random() < P_CROSS_LISTED
    holder = "subtitle" if captioned else "audio"
    return audio_hop(b, captioned_only=captioned, listed=_other(holder) if switch else holder)


def guest_hop(b: _Build, anchor: int | None, anchor_word: str, anchor_ref: str, fillable: bool = True,
              switch: bool = False) -> tuple[int, str, str | None]:
    """A subtitle-worded hop whose introduction sits in the subtitles or (`P_CROSS_LISTED`) only in the
    transcript. The need lists the source that holds it, or with `switch` the other one (the holder then as `alt`)."""
    spoken = b.rng.random() < P_CROSS_LISTED
    holder = "audio" if spoken else "subtitle"
    return subtitle_hop(b, anchor, anchor_word, anchor_ref, fillable=fillable, spoken_only=spoken,
                        listed=_other(holder) if switch else holder)


def _other(source: str) -> str:
    return "subtitle" if source == "audio" else "audio"


def visual_hop(b: _Build) -> tuple[int, str, str]:
    (color, obj), w, t = b.visual(), b.names.word(), b.time()
    b.frames.append(FrameCaption(t=t, caption=b.rng.choice(tx.FRAME_CUES).format(color=color, obj=obj, w=w)))
    (c2, o2), t2 = b.visual(), b.time()
    b.frames.append(FrameCaption(t=t2, caption=b.rng.choice(tx.FRAME_CUES).format(color=c2, obj=o2, w=b.names.word())))
    source = b.rng.choice(["clip", "frame"])
    ref = b.rng.choice(tx.FRAME_DESC).format(color=color, obj=obj)
    i = b.add(GoldNeed(description=tx.cap(ref), query_focus=tx.FRAME_FOCUS.format(color=color, obj=obj),
                       preferred_source=source, value=w, asset_id="v0"))
    return i, ref, w


def web_hop(b: _Build, anchor: int, entity: str, entity_ref: str, kind: str, numeric: bool, *,
            fillable: bool = True, conflict: bool = False, fact: dict | None = None,
            settle_in_frame: bool = False) -> tuple[int, dict, str | None, list[str]]:
    """A fact about `entity` on the web. Returns (need, fact spec, value, confusable values for mcq options).

    `settle_in_frame` (with `conflict`): no registry page; a plaque in the video states the value, and only that
    independent source (frame, listed as `alt`) settles the dispute: searching the web again finds the same two
    pages."""
    fact = fact or b.rng.choice(tx.NUM_FACTS[kind] if numeric else tx.TEXT_FACTS[kind])
    draw = (lambda: str(b.rng.randint(fact["lo"], fact["hi"]))) if numeric else b.names.place
    value = draw()
    others = [draw() for _ in range(3)]
    while value in others:
        others = [draw() for _ in range(3)]
    title = entity
    if fillable:
        b.page(title, " ".join([b.rng.choice(fact["page"]).format(e=entity, v=value), _bio(b, entity)]))
    else:  # the entity's page exists but says nothing about the fact
        b.page(title, _bio(b, entity))
    near = b.names.near(entity, word=-1 if kind == "person" else 0)
    b.page(near, b.rng.choice(fact["page"]).format(e=near, v=others[0]))  # confusable name, other value
    conflicting = None
    if conflict and fillable:
        conflicting = others[1]
        wrong = b.rng.choice(fact["page"]).format(e=entity, v=conflicting)
        # the disputing page repeats the fact's keywords, so a search for the fact finds both pages
        b.page(f"Discussion about {entity}", b.rng.choice(tx.CONFLICT_PAGE).format(fact=wrong)
               + f" (the {fact['key']} as the fans remember it)")
        confirmed = b.rng.choice(fact["page"]).format(e=entity, v=value)
        if settle_in_frame:
            b.frames.append(FrameCaption(t=b.time(), caption=tx.PLAQUE_FRAME.format(fact=confirmed, key=fact["key"])))
        else:
            b.page(f"{entity} registry", tx.REGISTRY_PAGE.format(fact=confirmed),
                   url=f"https://registry.example.gov/{b.tid}-{len(b.pages)}")
        b.conflict = True
    desc = fact["q"][0].format(ref=entity_ref).rstrip("?")
    in_frame = bool(conflicting and settle_in_frame)
    i = b.add(GoldNeed(description=desc, query_focus="{#%d} %s" % (anchor, fact["key"]), preferred_source="web",
                       depends_on=[anchor], value=value if fillable else None, fillable=fillable,
                       conflicting_value=conflicting,
                       confirm_query_focus=("{#%d} %s %s" % (anchor, tx.REGISTRY_KEY, fact["key"]))
                       if conflicting and not in_frame else None,
                       alt_sources=["frame"] if in_frame else [], resolved_by="frame" if in_frame else None))
    return i, fact, (value if fillable else None), [others[0], others[2], others[1]]


def _bio(b: _Build, entity: str) -> str:
    return b.rng.choice((f"{entity} is often mentioned in regional news.", f"Little else is known about {entity}.",
                         f"{entity} appeared in several local stories."))


def code_hop(b: _Build, a: int, b_idx: int | None, values: dict[int, str | None], const: int | None = None
             ) -> tuple[int, dict, str | None]:
    """A computation over one or two numeric needs (or one need and a constant from the question)."""
    comp = b.rng.choice([c for c in tx.COMPUTATIONS if b_idx is not None or c["const"]])
    rhs_code, rhs_expr = ("{#%d}" % b_idx, f"n{b_idx}") if b_idx is not None else (str(const), str(const))
    code = comp["code"].format(a="{#%d}" % a, b=rhs_code)
    expr = comp["expr"].format(a=a, b=b_idx).replace(f"n{b_idx}", rhs_expr)
    deps = [a] + ([b_idx] if b_idx is not None else [])
    value = None
    if all(values.get(i) is not None for i in deps):
        env = {f"n{i}": int(values[i]) for i in deps}
        value = str(eval(expr, {"__builtins__": {}, "abs": abs, "max": max}, env))  # our own expression
    i = b.add(GoldNeed(description="Compute the answer from the facts found", query_focus=code,
                       preferred_source="code", depends_on=deps, value=value, fillable=value is not None))
    return i, {**comp, "expr": expr}, value


# --- families --------------------------------------------------------------------------------------------------------


def _family(b: _Build, family: str) -> tuple[str, str, str | None, list[str] | None, list[GoldSlot], str | None]:
    """Lay out one family; returns (question, answer type, answer value, options, slots, computation)."""
    rng, unans = b.rng, b.unanswerable
    if family == "audio_subtitle":
        a, ref, x = spoken_hop(b)
        s, sref, p = guest_hop(b, a, x, ref, fillable=not unans)
        q = rng.choice(("Who is {r}?", "Give the full name of {r}.", "Name {r}.")).format(r=sref)
        value = None if unans else p
        return q, "text", value, None, [GoldSlot(name="answer", needs=[s], value=value)], None
    if family == "subtitle_web":
        x = b.names.word()
        s, sref, p = guest_hop(b, None, x, x)
        numeric = rng.random() < 0.6
        w, fact, v, _ = web_hop(b, s, p, sref, "person", numeric, fillable=not unans)
        return (rng.choice(fact["q"]).format(ref=sref), "number" if numeric else "text", v, None,
                [GoldSlot(name="answer", needs=[w], value=v)], None)
    if family in ("visual_web", "visual_web_code"):
        vi, vref, word = visual_hop(b)
        org = f"{word} {rng.choice(tx.ORG_KINDS)}"
        oref = f"the organisation named after {vref}"
        numeric = family == "visual_web_code" or rng.random() < 0.4
        w, fact, v, others = web_hop(b, vi, org, oref, "org", numeric, fillable=not unans,
                                     conflict=family == "visual_web_code" and rng.random() < P_CONFLICT)
        if family == "visual_web_code":
            const = rng.randint(2030, 2100) if fact["key"] == "founded year" else rng.randint(1000, 3000)
            c, comp, cv = code_hop(b, w, None, {w: v}, const)
            q = rng.choice(comp["q"]).format(A=fact["np"].format(ref=oref), B=const)
            return q, "number", cv, None, _comp_slots(c, w, cv, v, comp), comp["expr"]
        if not numeric and rng.random() < 0.5:
            return _mcq(b, rng.choice(fact["q"]).format(ref=oref), v, others, w)
        return (rng.choice(fact["q"]).format(ref=oref), "number" if numeric else "text", v, None,
                [GoldSlot(name="answer", needs=[w], value=v)], None)
    if family == "audio_subtitle_web":
        a, ref, x = spoken_hop(b)
        s, sref, p = guest_hop(b, a, x, ref)
        numeric = rng.random() < 0.5
        w, fact, v, others = web_hop(b, s, p, sref, "person", numeric, fillable=not unans,
                                     conflict=numeric and rng.random() < P_CONFLICT)
        q = rng.choice(fact["q"]).format(ref=sref)
        if not numeric and rng.random() < 0.5:
            return _mcq(b, q, v, others, w)
        return q, "number" if numeric else "text", v, None, [GoldSlot(name="answer", needs=[w], value=v)], None
    if family == "two_audio_list":
        a1, r1, x1 = spoken_hop(b)
        s1, _, p1 = guest_hop(b, a1, x1, r1)
        a2, r2, x2 = spoken_hop(b)
        s2, _, p2 = guest_hop(b, a2, x2, r2, fillable=not unans)
        q = rng.choice(("List the guests introduced by {a} and by {b}, in that order.",
                        "Who are the guests presented by {a} and by {b}? Answer as a list, in order.")
                       ).format(a=r1, b=r2)
        value = None if unans else f"{p1}, {p2}"
        return q, "list", value, None, [GoldSlot(name="answer", needs=[s1, s2], value=value)], None
    if family == "hard_join":
        a, ref, x = spoken_hop(b)
        s, sref, p = guest_hop(b, a, x, ref)
        w1, f1, v1, _ = web_hop(b, s, p, sref, "person", True, conflict=rng.random() < P_CONFLICT)
        vi, vref, word = visual_hop(b)
        org = f"{word} {rng.choice(tx.ORG_KINDS)}"
        oref = f"the organisation named after {vref}"
        w2, f2, v2, _ = web_hop(b, vi, org, oref, "org", True, fillable=not unans)
        c, comp, cv = code_hop(b, w1, w2, {w1: v1, w2: v2})
        q = rng.choice(comp["q"]).format(A=f1["np"].format(ref=sref), B=f2["np"].format(ref=oref))
        slots = [GoldSlot(name="fact_a", needs=[w1], value=v1), GoldSlot(name="fact_b", needs=[w2], value=v2),
                 GoldSlot(name="answer", kind="computation", needs=[c], expression=comp["expr"], value=cv)]
        return q, "number", cv, None, slots, comp["expr"]
    if family in PLANNING_FAMILIES:
        b.unanswerable = False  # these families test a decision, not abstention
        return _planning_family(b, family)
    raise ValueError(f"unknown family {family!r}")


def _planning_family(b: _Build, family: str):
    rng = b.rng
    if family == "source_switch":
        # the listed source of one hop cannot answer; the other source that can is listed as `alt`
        audio_switch = rng.random() < 0.5
        a, ref, x = spoken_hop(b, switch=audio_switch)
        s, sref, p = guest_hop(b, a, x, ref, switch=not audio_switch)
        if rng.random() < 0.5:
            q = rng.choice(("Who is {r}?", "Give the full name of {r}.")).format(r=sref)
            return q, "text", p, None, [GoldSlot(name="answer", needs=[s], value=p)], None
        w, fact, v, _ = web_hop(b, s, p, sref, "person", True)
        return (rng.choice(fact["q"]).format(ref=sref), "number", v, None,
                [GoldSlot(name="answer", needs=[w], value=v)], None)
    if family == "tight_budget":
        # two side needs listed first, then the chain; the guest's need unblocks two web facts; the tool budget
        # covers exactly the chain, so one call on a side need leaves the answer unreachable
        for _ in range(2):
            _supplementary(b)
        a, ref, x = spoken_hop(b)
        s, sref, p = guest_hop(b, a, x, ref)
        f1, f2 = rng.sample(tx.NUM_FACTS["person"], 2)
        w1, _, v1, _ = web_hop(b, s, p, sref, "person", True, fact=f1)
        w2, _, v2, _ = web_hop(b, s, p, sref, "person", True, fact=f2)
        c, comp, cv = code_hop(b, w1, w2, {w1: v1, w2: v2})
        q = rng.choice(comp["q"]).format(A=f1["np"].format(ref=sref), B=f2["np"].format(ref=sref))
        slots = [GoldSlot(name="fact_a", needs=[w1], value=v1), GoldSlot(name="fact_b", needs=[w2], value=v2),
                 GoldSlot(name="answer", kind="computation", needs=[c], expression=comp["expr"], value=cv)]
        b.tool_budget = 5
        return q, "number", cv, None, slots, comp["expr"]
    if family == "supplementary_finish":
        # a side need opens up right after the first hop (listed before the next blocking one); the tool budget
        # covers only the blocking needs, and once they are filled finishing is right
        vi, vref, word = visual_hop(b)
        _supplementary(b, depends_on=[vi])
        org = f"{word} {rng.choice(tx.ORG_KINDS)}"
        oref = f"the organisation named after {vref}"
        numeric = rng.random() < 0.5
        w, fact, v, _ = web_hop(b, vi, org, oref, "org", numeric)
        b.tool_budget = 2
        return (rng.choice(fact["q"]).format(ref=oref), "number" if numeric else "text", v, None,
                [GoldSlot(name="answer", needs=[w], value=v)], None)
    if family == "conflict_second_source":
        # two web pages disagree; searching again finds the same two, a plaque in the video settles it
        vi, vref, word = visual_hop(b)
        org = f"{word} {rng.choice(tx.ORG_KINDS)}"
        oref = f"the organisation named after {vref}"
        w, fact, v, _ = web_hop(b, vi, org, oref, "org", True, conflict=True, settle_in_frame=True)
        return (rng.choice(fact["q"]).format(ref=oref), "number", v, None,
                [GoldSlot(name="answer", needs=[w], value=v)], None)
    if family == "compute_slot":
        # a computation slot and no code need: once its inputs are filled no need is actionable, and the right call
        # aims at the slot (`{"action": "call", "slot": "answer"}`, code_executor) before finishing
        x = b.names.word()
        s, sref, p = guest_hop(b, None, x, x)
        w, fact, v, _ = web_hop(b, s, p, sref, "person", True)
        comp = rng.choice([c for c in tx.COMPUTATIONS if c["const"]])
        const = rng.randint(2030, 2100) if fact["key"] == "born year" else rng.randint(100, 900)
        expr = comp["expr"].replace("n{b}", str(const)).format(a=w)
        value = str(eval(expr, {"__builtins__": {}, "abs": abs, "max": max}, {f"n{w}": int(v)}))  # our own expression
        q = rng.choice(comp["q"]).format(A=fact["np"].format(ref=sref), B=const)
        slots = [GoldSlot(name="fact_a", needs=[w], value=v),
                 GoldSlot(name="answer", kind="computation", needs=[w], expression=expr, value=value)]
        return q, "number", value, None, slots, expr
    raise ValueError(f"unknown family {family!r}")  # pragma: no cover


def _comp_slots(c: int, w: int, cv: str | None, v: str | None, comp: dict) -> list[GoldSlot]:
    return [GoldSlot(name="fact_a", needs=[w], value=v),
            GoldSlot(name="answer", kind="computation", needs=[c], expression=comp["expr"], value=cv)]


def _mcq(b: _Build, q: str, value: str | None, others: list[str], w: int):
    opts = [value if value is not None else b.names.place()] + others
    b.rng.shuffle(opts)
    options = [f"{'ABCD'[k]}. {o}" for k, o in enumerate(opts)]
    letter = "ABCD"[opts.index(value)] if value is not None else None
    return q, "mcq", letter, options, [GoldSlot(name="answer", needs=[w], value=value)], None


def _supplementary(b: _Build, depends_on: list[int] | None = None) -> None:
    color, obj = b.visual()
    t = b.time()
    b.frames.append(FrameCaption(t=t, caption=tx.SUPP_FRAME_CUE.format(color=color, obj=obj)))
    b.add(GoldNeed(description=f"Colour of the {obj} in the background (context only)", role="supplementary",
                   query_focus=tx.SUPP_FOCUS.format(obj=obj), preferred_source="frame", value=color,
                   asset_id="v0", depends_on=list(depends_on or [])))


def make_task(index: int, seed: int, names: tx.Names) -> tuple[Task, list[Page], dict[str, str]]:
    """One task, its pages (for the shared corpus) and its asset files {relative path: text}."""
    rng = random.Random(f"omnidecision-synth:{seed}:{index}")
    names.rng = rng
    tid = f"syn-{seed}-{index:05d}"
    duration = float(rng.randint(30, 72) * 10)
    b = _Build(tid=tid, rng=rng, names=names, duration=duration, free_slots=list(range(int(duration // 10) - 1)))
    fams = list(FAMILIES)
    family = rng.choices(fams, weights=[FAMILIES[f][1] for f in fams])[0]
    b.unanswerable = rng.random() < P_UNANSWERABLE
    question, atype, answer, options, slots, computation = _family(b, family)
    if rng.random() < P_SUPPLEMENTARY and b.tool_budget is None:
        _supplementary(b)
    for _ in range(rng.randint(4, 9)):  # filler speech and subtitles, filler frames
        t = b.time() if b.free_slots else 1.0
        line = rng.choice(tx.FILLER_SPEECH)
        (b.subs if rng.random() < 0.5 else b.speech).append((t, t + 3.0, line))
    for _ in range(rng.randint(2, 5)):
        b.frames.append(FrameCaption(t=float(rng.randint(0, int(duration) - 1)), caption=rng.choice(tx.FILLER_FRAMES)))
    prefix = rng.choice(("", "", "In the video, ", "Watch the clip. ", "Using the video and the web: "))
    question = prefix + (question[:1].lower() + question[1:] if prefix.endswith(", ") else question)
    answerable = not b.unanswerable
    if not answerable:
        answer = None
    files = {f"assets/{tid}.srt": _srt(b.subs), f"assets/{tid}.vtt": _vtt(b.speech)}
    asset = Asset(id="v0", type="video", duration=duration, subtitles=f"assets/{tid}.srt",
                  transcript=f"assets/{tid}.vtt", audio_events=sorted(b.events, key=lambda e: e.start),
                  frame_captions=sorted(b.frames, key=lambda f: (f.t, f.caption)),
                  description="Synthetic video (text surrogates only)")
    task = Task(id=tid, question=question, answer=answer, answer_type=atype, options=options,
                level=FAMILIES[family][0], category=family, source="synthetic", assets=[asset],
                corpus="corpus.jsonl", answerable=answerable, max_tool_calls=b.tool_budget,
                gold=GoldDecomposition(needs=b.needs, slots=slots, computation=computation),
                meta={"family": family, "conflict": b.conflict, "seed": seed, "index": index})
    return task, b.pages, files


def _ts(t: float, sep: str) -> str:
    ms = int(round(t * 1000))
    h, ms = divmod(ms, 3_600_000)
    m, ms = divmod(ms, 60_000)
    s, ms = divmod(ms, 1000)
    return f"{h:02d}:{m:02d}:{s:02d}{sep}{ms:03d}"


def _srt(cues: list[tuple[float, float, str]]) -> str:
    cues = sorted(cues)
    return "".join(f"{k}\n{_ts(a, ',')} --> {_ts(z, ',')}\n{text}\n\n" for k, (a, z, text) in enumerate(cues, 1))


def _vtt(cues: list[tuple[float, float, str]]) -> str:
    return "WEBVTT\n\n" + "".join(f"{_ts(a, '.')} --> {_ts(z, '.')}\n{text}\n\n" for a, z, text in sorted(cues))


def generate(n: int, seed: int = 0) -> tuple[list[Task], list[Page], dict[str, str]]:
    """All tasks, the shared corpus and the asset files, in memory."""
    names = tx.Names(random.Random(seed))
    tasks, corpus, files = [], [], {}
    for i in range(n):
        task, pages, fs = make_task(i, seed, names)
        tasks.append(task)
        corpus.extend(pages)
        files.update(fs)
    return tasks, corpus, files


def write_suite(n: int, seed: int, out: str | Path) -> Path:
    """Write tasks.jsonl, corpus.jsonl and assets/ under `out`; returns the tasks file."""
    out = Path(out)
    tasks, corpus, files = generate(n, seed)
    (out / "assets").mkdir(parents=True, exist_ok=True)
    for rel, text in files.items():
        (out / rel).write_text(text, encoding="utf-8")
    with open(out / "corpus.jsonl", "w", encoding="utf-8") as f:
        for page in corpus:
            f.write(json.dumps(page.model_dump(), ensure_ascii=False) + "\n")
    path = out / "tasks.jsonl"
    with open(path, "w", encoding="utf-8") as f:
        for task in tasks:
            f.write(task.model_dump_json(exclude_defaults=True) + "\n")
    logger.info("wrote %d tasks, %d pages and %d asset files to %s", len(tasks), len(corpus), len(files), out)
    return path


def load_suite(out: str | Path) -> list[Task]:
    """Read a suite written by `write_suite` with `base_dir` set (the loaders do the same for `fmt="synthetic"`)."""
    out = Path(out)
    with open(out / "tasks.jsonl", encoding="utf-8") as f:
        return [Task.model_validate_json(line).model_copy(update={"base_dir": str(out)}) for line in f if line.strip()]

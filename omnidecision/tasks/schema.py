"""The task schema shared by every loader (synthetic, OmniGAIA, WorldSense, JSONL).

    >>> Task(id="t1", question="2+2?", answer="4", answer_type="number").level
    'easy'
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from omnidecision.ledger.schema import NeedRole, SlotKind, Source
from omnidecision.protocol.actions import check_tool_name

AnswerType = Literal["number", "text", "list", "mcq"]
AssetType = Literal["video", "audio", "image"]


class _Rec(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AudioEvent(_Rec):
    """A labelled sound in an asset's audio (an offline surrogate the perception tools read).

    Attributes:
        start: seconds from the start of the asset
        end: seconds from the start of the asset
        label: what is heard ("applause", "a siren")
    """

    start: float
    end: float
    label: str


class FrameCaption(_Rec):
    """A caption of the frame at one moment of a video (an offline surrogate the frame tools read).

    Attributes:
        t: seconds from the start of the video
        caption: what the frame shows
    """

    t: float
    caption: str


class Asset(_Rec):
    """A media asset with optional offline surrogates (used when the media file is absent or perception is off).

    Attributes:
        id: the asset's id, unique within its task (the ledger's `asset_id`)
        type: video, audio or image
        path: the media file (relative paths resolve against the task's `base_dir` or the task file's folder)
        duration: seconds (video, audio)
        subtitles: an .srt / .vtt file of the asset's subtitles
        transcript: an .srt / .vtt file of its speech
        audio_events: labelled sounds, offline
        frame_captions: captions of frames at given times, offline
        description: a text description of the asset (an image's content), offline
    """

    id: str
    type: AssetType
    path: str | None = None
    duration: float | None = None
    subtitles: str | None = None  # .srt / .vtt path
    transcript: str | None = None  # .vtt / .srt path of speech
    audio_events: list[AudioEvent] = Field(default_factory=list)
    frame_captions: list[FrameCaption] = Field(default_factory=list)
    description: str | None = None


class Page(_Rec):
    """A web page the task ships, read by the offline page reader and search (`pages`, or a shared `corpus`).

    Attributes:
        url: the page's address (what search returns and the page reader is asked for)
        title: its title
        text: its readable text
    """

    url: str
    title: str = ""
    text: str


class GoldNeed(_Rec):
    """A need of the gold decomposition. `value=None` with `fillable=False` marks a need no tool can fill."""

    description: str
    role: NeedRole = "blocking"
    query_focus: str = ""
    preferred_source: Source = "web"
    depends_on: list[int] = Field(default_factory=list)
    value: str | None = None
    fillable: bool = True
    asset_id: str | None = None
    conflicting_value: str | None = None  # a wrong value some source states; the teacher must resolve it
    confirm_query_focus: str | None = None  # a query (same `{#i}` placeholders) that reaches a confirming source
    alt_sources: list[Source] = Field(default_factory=list)  # other sources that hold the value
    resolved_by: Source | None = None  # only this (independent) source settles a conflict on the need


class GoldSlot(_Rec):
    name: str
    kind: SlotKind = "fact"
    needs: list[int] = Field(default_factory=list)
    expression: str | None = None
    value: str | None = None


class GoldDecomposition(_Rec):
    needs: list[GoldNeed]
    slots: list[GoldSlot] = Field(default_factory=list)
    computation: str | None = None  # Python expression over n0, n1, ... giving the answer


class Task(_Rec):
    """One task: the question, its gold answer and what the agent may use to answer it.

    Attributes:
        id: unique within the task file
        question: the question as the agent sees it
        answer: the gold answer (a string; for `mcq` the option letter); None when unknown
        answer_type: number, text, list or mcq: how the answer is compared
        options: the choices of an `mcq` task ("A. red", "B. blue", ...)
        level: difficulty (easy, medium, hard), reported per level
        category: the task's domain, reported per category
        source: where the task comes from (jsonl, omnigaia, worldsense, synthetic)
        assets: the media of the task (video, audio, image), with offline surrogates
        pages: web pages the offline tools may return for this task
        corpus: a JSONL file of pages (url, title, text) shared by many tasks
        blocked_domains: hosts (or host + path prefix) search and the page reader must not reach (the answer's pages)
        tools: the tools this task allows, each a registered tool (None: every tool); shown in the digest
        gold: the gold decomposition (the synthetic suite's needs and slots; the rule planner reads it)
        answerable: False for a task whose evidence cannot be found (the right outcome is to abstain)
        max_tool_calls: the task's tool-call budget (None: the recipe's)
        base_dir: the folder relative asset and corpus paths resolve against (default: the task file's folder)
        meta: anything else the loader keeps (OmniGAIA: the raw record, its sources and annotated solution)
    """

    id: str
    question: str
    answer: str | None = None
    answer_type: AnswerType = "text"
    options: list[str] | None = None
    level: str = "easy"
    category: str = "general"
    source: str = "jsonl"
    assets: list[Asset] = Field(default_factory=list)
    pages: list[Page] = Field(default_factory=list)
    corpus: str | None = None  # path to a JSONL page corpus shared by many tasks
    blocked_domains: list[str] = Field(default_factory=list)  # a host ("hf.co") or host + path prefix, as written
    # the tools this task allows (None: every tool); shown in the digest's R0. A misspelt name would forbid every
    # call to the tool meant, silently: it is an error where the task is read (file, line, `tools.N`)
    tools: list[Annotated[str, AfterValidator(check_tool_name)]] | None = None
    gold: GoldDecomposition | None = None
    answerable: bool = True
    max_tool_calls: int | None = Field(None, ge=1)  # the task's tool-call budget (part of R0), None: the recipe's
    base_dir: str | None = None  # relative asset/corpus paths resolve against this
    meta: dict[str, Any] = Field(default_factory=dict)

    def resolve(self, path: str | None) -> Path | None:
        if path is None:
            return None
        p = Path(path)
        return p if p.is_absolute() or self.base_dir is None else Path(self.base_dir) / p

    def asset(self, asset_id: str | None) -> Asset | None:
        if asset_id is None:
            return self.assets[0] if self.assets else None
        return next((a for a in self.assets if a.id == asset_id), None)

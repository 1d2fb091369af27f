"""Task formats: a benchmark object owns how its files are recognised, loaded and scored.

A format is a `TaskFormat` subclass in one module of `omnidecision/tasks/loaders/`, registered with
`@register_format("name")`: `detect` says whether a path is in this format ("auto"), `load` reads it, `options` are
the loader options it takes, and `score` judges a run's answer on one of its tasks (a task's `source` names its
format). `tasks.loaders.load_tasks` and `tasks.grading` look formats up here; nothing else lists them.

    >>> sorted(TASK_FORMATS)
    ['jsonl', 'omnigaia', 'synthetic', 'worldsense']
    >>> try:
    ...     TASK_FORMATS["csv"]
    ... except KeyError as exc:
    ...     print(exc)
    unknown task format 'csv'; registered: jsonl, omnigaia, synthetic, worldsense
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from omnidecision.protocol.records import JudgeResult
from omnidecision.protocol.registry import Registry
from omnidecision.tasks.schema import Task


class TaskFormat:
    """One benchmark's files. Subclasses override `load`, and `detect`/`score` where they differ."""

    name: ClassVar[str] = ""
    options: ClassVar[frozenset[str]] = frozenset()  # loader options it takes (others are an error)
    must_exist: ClassVar[bool] = True  # False: `load` reports a missing path itself (with a hint)
    llm_judge: ClassVar[bool] = True  # whether an LLM judge may decide a miss of the string scorer
    # whether its questions need real tools (perception over media, web search): an evaluation in the offline
    # environment (text surrogates, BM25 over no pages) measures a planner without evidence, so eval refuses it
    needs_tools: ClassVar[bool] = False

    def detect(self, path: Path, first: dict[str, Any] | None) -> bool:
        """Whether `path` is in this format. `first` is the first record of a JSON file (None for a folder or
        before the file is parsed: formats that tell by the path alone answer then)."""
        return False

    def load(self, path: Path, **options: Any) -> list[Task]:
        raise NotImplementedError

    def score(self, task: Task, prediction: str | None, scorer: str) -> JudgeResult | None:
        """The offline judgement of `prediction` on one answerable task with a gold answer; None: the generic
        grading of `tasks.grading` (an option letter for a multiple-choice task, else the string scorer)."""
        return None


TASK_FORMATS: Registry[TaskFormat] = Registry("task format", package="omnidecision.tasks.loaders")
FormatClass = TypeVar("FormatClass", bound=type[TaskFormat])


def register_format(name: str) -> Callable[[FormatClass], FormatClass]:
    """Class decorator: sets `cls.name` and registers one instance under `name`."""

    def add(cls: FormatClass) -> FormatClass:
        cls.name = name
        TASK_FORMATS.register(name)(cls())
        return cls

    return add


def format_of(task: Task) -> TaskFormat | None:
    """The registered format a task came from (`task.source`), None for other sources."""
    return TASK_FORMATS.get(task.source)

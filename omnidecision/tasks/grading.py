"""Answer grading (not the reward judges of `omnidecision.rewards`): the OmniGAIA protocol, string scorers (the
official GAIA one and a lenient one), WorldSense multiple-choice letters.

String scorers (`SCORERS`, chosen per benchmark by a recipe's `judge.scorer`; the record's `judge.method` and the
eval report's `judge` block name the one used):
- "gaia": `gaia_scorer`, the GAIA benchmark's official rules exactly (its leaderboard's `question_scorer`).
- "lenient": `lenient_match`, this project's variant: units after numbers, articles, collapsed (not removed) spaces.

`judge_run(task, prediction, llm=None, scorer="lenient")` (async): the task's format (`tasks.formats`, by
`task.source`) scores it offline where it has its own protocol (OmniGAIA: `loaders/omnigaia.py`; WorldSense's option
letters: `loaders/worldsense.py`); otherwise a multiple-choice task is scored by its option letter and anything
else by the string scorer. On a miss the LLM judge (if given, and if the format allows it) decides with the
benchmark's Correct/Incorrect prompt (`prompts/omnigaia_judge.md`). An empty/unclear judge reply or a `BackendError`
is a judge FAILURE (`JudgeResult(correct=None)`), never counted as correct.
`judge_offline(task, prediction)` is the same without any LLM.

    python -c "from omnidecision.tasks.grading import gaia_scorer; print(gaia_scorer('2years', '2 years'))"

    >>> lenient_match("$1,234.0", "1234"), gaia_scorer("$1,234.0", "1234")
    (True, True)
    >>> lenient_match("790 units", "790"), gaia_scorer("790 units", "790")
    (True, False)
    >>> extract_choice("A man is walking, so the answer is (C).", ["A. run", "B. sit", "C. walk", "D. swim"])
    'C'
"""

from __future__ import annotations

import logging
import math
import re
import string
from collections.abc import Callable
from functools import cache
from importlib import resources
from typing import Literal

from omnidecision.protocol.chat import BackendError, ChatBackend, ChatRequest
from omnidecision.protocol.records import JudgeResult
from omnidecision.tasks.formats import format_of
from omnidecision.tasks.schema import Task

logger = logging.getLogger(__name__)

_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.S | re.I)
_THINK = re.compile(r"<think>.*?</think>", re.S)


@cache
def judge_prompt(name: str = "omnigaia_judge") -> str:
    return resources.files("omnidecision.tasks").joinpath("prompts", f"{name}.md").read_text("utf-8").rstrip("\n")


# ---------------------------------------------------------------- prediction extraction, OmniGAIA normalisation


def extract_prediction(text: str | None, last_words: int = 20) -> str:
    """The last `<answer>…</answer>`, else the last `last_words` words (the OmniGAIA protocol).

    >>> extract_prediction("so <answer>12</answer> hmm <answer> 13 </answer>")
    '13'
    """
    if not text:
        return ""
    text = _THINK.sub("", text)
    tags = _ANSWER_TAG.findall(text)
    if tags:
        return tags[-1].strip()
    return " ".join(text.split()[-last_words:])


def normalize_em(text: str | None) -> str:
    """Lower-case and collapse whitespace (OmniGAIA exact match)."""
    return " ".join(str(text or "").lower().split())


# ---------------------------------------------------------------- the official GAIA scorer


def _gaia_float(text: str) -> float | None:
    """Python's float() of the text, None where it raises (the rules' `is_float`)."""
    try:
        return float(text)
    except ValueError:
        return None


def _gaia_number(text: str) -> float:
    """The rules' number normalisation: drop every `$`, `%` and `,`, then float(); infinity when that fails."""
    for char in "$%,":
        text = text.replace(char, "")
    value = _gaia_float(text)
    return math.inf if value is None else value


def _gaia_str(text: str, remove_punct: bool = True) -> str:
    """The rules' string normalisation: remove ALL whitespace, lower-case, then (optionally) ASCII punctuation."""
    text = re.sub(r"\s", "", text).lower()
    return text.translate(str.maketrans("", "", string.punctuation)) if remove_punct else text


def gaia_scorer(prediction: str | None, gold: str) -> bool:
    """The GAIA benchmark's official scoring rules, exactly:
    - a gold that float() accepts is a number: the prediction, with `$ % ,` removed, must float() to the same value
      (anything else, e.g. "790 units", scores as infinity: wrong);
    - else a gold holding `,` or `;` is a list: both sides split on `,` and `;` (no other trimming), same length,
      element-wise: numeric gold elements as numbers, the others as strings without whitespace, lower-cased, with
      punctuation KEPT;
    - else strings compare with all whitespace and ASCII punctuation removed, lower-cased ("sea gull" = "seagull").
    A missing prediction is the string "None", as in the official scorer.

    >>> [gaia_scorer(p, g) for p, g in [("2years", "2 years"), ("$1,000", "1000"), ("apple; Pear", "apple, pear")]]
    [True, True, True]
    """
    prediction = "None" if prediction is None else str(prediction)
    gold = str(gold)
    gold_num = _gaia_float(gold)
    if gold_num is not None:
        return _gaia_number(prediction) == gold_num
    if "," in gold or ";" in gold:
        golds, preds = re.split(r"[,;]", gold), re.split(r"[,;]", prediction)
        if len(golds) != len(preds):
            return False
        for p, g in zip(preds, golds, strict=True):
            g_num = _gaia_float(g)
            if g_num is not None:
                if _gaia_number(p) != g_num:
                    return False
            elif _gaia_str(p, remove_punct=False) != _gaia_str(g, remove_punct=False):
                return False
        return True
    return _gaia_str(prediction) == _gaia_str(gold)


# ---------------------------------------------------------------- the lenient variant

_NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_UNIT_TAIL = re.compile(r"^[^\W\d_]+(?:[/ ²³°.]*[^\W\d_]*[²³]?){0,3}\.?$")


def parse_number(text: str | None, allow_unit: bool = True) -> float | None:
    """A number written with commas, `$`, `%`, `≈`/`~`, or (with `allow_unit`) a trailing unit of up to three words;
    None otherwise.

    >>> [parse_number(s) for s in ["1,234", "$5.8", "46.31%", "2.45 m/s²", "11,386 km", "12 of 20", "3, 5", "abc"]]
    [1234.0, 5.8, 46.31, 2.45, 11386.0, None, None, None]
    """
    if text is None:
        return None
    s = str(text).strip().replace("$", "").replace("%", "").replace("\u2212", "-")
    s = re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", s)  # thousands separators only: "1, 2" stays two numbers
    s = s.lstrip("≈~").strip().rstrip(".")
    m = re.match(rf"^({_NUM})\s*(.*)$", s)
    if not m:
        return None
    tail = m.group(2).strip()
    if tail and (not allow_unit or len(tail.split()) > 3 or not _UNIT_TAIL.match(tail)):
        return None
    try:
        value = float(m.group(1))
    except ValueError:
        return None
    return value if math.isfinite(value) else None


_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans({c: " " for c in string.punctuation + "“”‘’«»—–…"})


def normalize_str(text: str | None) -> str:
    """Lower-case, drop punctuation and articles, collapse whitespace.

    >>> normalize_str("The  Marker, Inc.")
    'marker inc'
    """
    s = str(text or "").lower().translate(_PUNCT)
    return " ".join(_ARTICLES.sub(" ", s).split())


def _split_list(text: str) -> list[str]:
    return [x.strip() for x in re.split(r"[,;]", text) if x.strip()]


def _is_number(text: str) -> bool:
    return parse_number(text) is not None


def _numbers_equal(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def lenient_match(prediction: str | None, gold: str) -> bool:
    """This project's lenient quasi-exact match (NOT the official GAIA rules, see `gaia_scorer`): a numeric gold
    compares as a float (commas, a unit of up to three words, $ and % stripped); a gold with ',' or ';' compares
    element by element (same count, numbers as numbers, strings normalised); otherwise strings lower-cased without
    punctuation or articles, whitespace collapsed (not removed).

    >>> [lenient_match(p, g) for p, g in [("Kale; broccoli", "kale, Broccoli"), ("12 km", "12"), ("13", "12")]]
    [True, True, False]
    """
    if prediction is None:
        return False
    prediction, gold = str(prediction).strip(), str(gold).strip()
    gold_num = parse_number(gold, allow_unit=False)  # a gold like "433 Eros" is a name, not a number
    if gold_num is not None:
        pred_num = parse_number(prediction)
        return pred_num is not None and _numbers_equal(pred_num, gold_num)
    if re.search(r"[,;]", gold):
        golds, preds = _split_list(gold), _split_list(prediction)
        if len(golds) != len(preds):
            return False
        for g, p in zip(golds, preds, strict=True):
            g_num = parse_number(g, allow_unit=False)
            if g_num is not None:
                p_num = parse_number(p)
                if p_num is None or not _numbers_equal(p_num, g_num):
                    return False
            elif normalize_str(g) != normalize_str(p):
                return False
        return True
    return normalize_str(prediction) == normalize_str(gold)


ScorerName = Literal["gaia", "lenient"]
SCORERS: dict[str, Callable[[str | None, str], bool]] = {"gaia": gaia_scorer, "lenient": lenient_match}
SCORER_METHODS = {"gaia": "gaia_scorer", "lenient": "lenient_match"}


def get_scorer(name: str) -> Callable[[str | None, str], bool]:
    if name not in SCORERS:
        raise ValueError(f"judge.scorer: {name!r} is not one of {', '.join(SCORERS)}")
    return SCORERS[name]


# ---------------------------------------------------------------- multiple-choice letters


def _option_letters(options: list[str] | None) -> list[str]:
    if not options:
        return list("ABCD")
    letters = []
    for i, opt in enumerate(options):
        m = re.match(r"^\s*\(?([A-Z])[.):]\s", opt + " ")
        letters.append(m.group(1) if m else chr(ord("A") + i))
    return letters


def _option_text(option: str) -> str:
    return normalize_str(re.sub(r"^\s*\(?[A-Z][.):]\s*", "", option))


def extract_choice(text: str | None, options: list[str] | None = None) -> str | None:
    """The option letter a free-form reply picks, or None when it picks none (or several).

    Order: an `<answer>` tag; a bare letter; "answer/option/choice (is) X"; "(X)"/"[X]"; a line "X." / "X)";
    the text of exactly one option; a lone capital letter that is not the article "A" ("A man is ...").

    >>> [extract_choice(s) for s in ["B", "(B)", "Answer: C", "I pick option D.", "A man is running.", "A"]]
    ['B', 'B', 'C', 'D', None, 'A']
    """
    if not text:
        return None
    text = _THINK.sub("", str(text)).strip()
    tags = _ANSWER_TAG.findall(text)
    if tags:
        text = tags[-1].strip()
    letters = _option_letters(options)
    cls = "".join(letters)

    bare = text.strip().strip("*_`'\"").strip()
    bare = re.sub(r"^[\(\[]\s*([A-Z])\s*[\)\]]$", r"\1", bare).rstrip(".):")
    if len(bare) == 1 and bare in letters:
        return bare

    patterns = [
        rf"(?i:answer|option|choice)\s*(?:is|would be|should be)?\s*[:=\-]?\s*\**[\(\[]?([{cls}])[\)\]]?(?![A-Za-z])",
        rf"[\(\[]([{cls}])[\)\]]",
        rf"(?m)^\s*\**([{cls}])[.):]\s",
    ]
    for pat in patterns:
        found = re.findall(pat, text)
        if found:
            return found[-1]

    if options:
        norm = normalize_str(text)
        hits = [letters[i] for i, opt in enumerate(options) if _option_text(opt) and _option_text(opt) in norm]
        if len(hits) == 1:
            return hits[0]

    lone = [
        m.group(1)
        for m in re.finditer(rf"(?<![A-Za-z'’])([{cls}])(?![A-Za-z'’])", text)
        if not (m.group(1) == "A" and re.match(r"\s+[a-z]", text[m.end():]))  # the article "A man ..."
    ]
    return lone[0] if len(set(lone)) == 1 else None


# ---------------------------------------------------------------- the LLM judge


def parse_judge_reply(text: str | None) -> bool | None:
    """'Correct' → True, 'Incorrect' (or 'not correct') → False, anything else (empty, unclear) → None.

    >>> [parse_judge_reply(s) for s in ["Correct", "Incorrect.", "<think>hm</think> correct", "", "Maybe"]]
    [True, False, True, None, None]
    """
    if not text:
        return None
    text = str(text).split("</think>")[-1].strip().lower()
    if re.search(r"\bincorrect\b|\bnot\s+correct\b", text):
        return False
    if re.search(r"\bcorrect\b", text):
        return True
    return None


async def llm_judge(question: str, prediction: str, gold: str, llm: ChatBackend) -> JudgeResult:
    """Ask the judge model; a backend error or an empty/unclear reply is a judge failure (correct=None)."""
    prompt = judge_prompt().format(question=question, predicted=prediction, labeled=gold)
    request = ChatRequest(role="judge", messages=[{"role": "user", "content": prompt}],
                          context={"question": question, "prediction": prediction, "gold": gold})
    try:
        response = await llm.chat(request)
    except BackendError as exc:
        logger.warning("judge backend failed: %s", exc.reason)
        return JudgeResult(correct=None, method="llm_judge_failed", prediction=prediction, detail=exc.reason)
    verdict = parse_judge_reply(response.text)
    if verdict is None:
        detail = f"unclear judge reply: {response.text[:200]!r}"
        return JudgeResult(correct=None, method="llm_judge_failed", prediction=prediction, detail=detail,
                           usage=response.usage, model=response.model)
    return JudgeResult(correct=verdict, method="llm_judge", prediction=prediction, detail=response.text[:200],
                       usage=response.usage, model=response.model)


# ---------------------------------------------------------------- dispatch


def score_choice(task: Task, prediction: str | None) -> JudgeResult:
    """A multiple-choice task: the option letter the prediction picks equals the gold letter."""
    letter = extract_choice(prediction, task.options)
    detail = None if letter else "no option letter found in the prediction"
    return JudgeResult(correct=letter == (task.answer or "").strip().upper(), method="mcq", prediction=letter,
                       detail=detail)


def score_string(task: Task, prediction: str | None, scorer: str) -> JudgeResult:
    """The named string scorer on the last `<answer>` tag (else the whole prediction)."""
    tags = _ANSWER_TAG.findall(prediction or "")
    pred = (tags[-1] if tags else prediction or "").strip()
    if not pred:
        return JudgeResult(correct=False, method="empty_prediction", prediction=pred)
    return JudgeResult(correct=get_scorer(scorer)(pred, task.answer or ""), method=SCORER_METHODS[scorer],
                       prediction=pred)


def llm_may_judge(task: Task) -> bool:
    """Whether an LLM judge may decide a string-scorer miss: not for multiple choice, nor where the task's format
    says no."""
    fmt = format_of(task)
    return task.answer_type != "mcq" and (fmt is None or fmt.llm_judge)


def judge_offline(task: Task, prediction: str | None, outcome: str | None = None,
                  scorer: ScorerName = "lenient") -> JudgeResult:
    """Every judge that needs no LLM (for OmniGAIA: exact match, then the string scorer labelled "…_offline").

    An unanswerable task (`answerable=False`) is judged on the run's outcome: only `insufficient` is right.
    """
    if not task.answerable:
        if outcome is None:
            return JudgeResult(correct=None, method="unanswerable", prediction=prediction,
                               detail="unanswerable task judged without the run's outcome")
        return JudgeResult(correct=outcome == "insufficient", method="unanswerable", prediction=prediction,
                           detail=f"outcome {outcome}; the right outcome is insufficient")
    if task.answer is None:
        return JudgeResult(correct=None, method="no_gold", prediction=prediction, detail="the task has no answer")
    fmt = format_of(task)
    own = fmt.score(task, prediction, scorer) if fmt is not None else None
    if own is not None:
        return own
    if task.answer_type == "mcq":
        return score_choice(task, prediction)
    return score_string(task, prediction, scorer)


async def judge_run(task: Task, prediction: str | None, llm: ChatBackend | None = None,
                    outcome: str | None = None, scorer: ScorerName = "lenient") -> JudgeResult:
    """Judge a run's answer against the task's gold answer with the named string scorer (module docstring)."""
    offline = judge_offline(task, prediction, outcome, scorer)
    if llm is None or not llm_may_judge(task) or offline.method in ("no_gold", "empty_prediction", "exact_match",
                                                         "unanswerable"):
        return offline
    if offline.method == SCORER_METHODS[scorer] and offline.correct:
        return offline
    return await llm_judge(task.question, offline.prediction or "", task.answer or "", llm)

"""The learned reward judge: a small sequence-classification model scores (planner prompt, decision) in [0, 1].

It is trained by `omnidecision judge train` (omnidecision/rl/judge_train.py, TRL's `RewardTrainer`) on what followed
each decision in the recorded runs: the critic's verdict moved the ledger (a need filled, a slot verified, a conflict
resolved, the finalizer's check passed) in a run that ended correct, against decisions that moved nothing. So it can
know what no closure check computes: which source tends to hold which kind of evidence, which finishes the finalizer
accepts. Its score is the sigmoid of the model's scalar output. Unparseable decisions are not scored (None: the
closure checks already give them 0). Runs on the CPU inside the demo; `device` puts it on an accelerator.

    python -c "from omnidecision.rewards.learned_judge import LearnedJudge; \\
               print(LearnedJudge('runs/demo/models/judge').score([[{'role': 'user', 'content': 'x'}]], ['{}']))"
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from functools import cache
from typing import Any

from omnidecision.protocol.prompts import render_planner_messages
from omnidecision.rewards.decision import Decision, completion_text, load_ledger
from omnidecision.rewards.registry import register_reward

logger = logging.getLogger(__name__)


def judge_text(tokenizer: Any, prompt: Sequence[dict[str, str]], decision: str) -> str:
    """The text the judge reads: the planner's prompt and the decision as the assistant turn, in the chat template
    the planner was trained with (the same rendering at training and scoring time)."""
    messages = [{"role": str(m["role"]), "content": str(m["content"])} for m in prompt]
    messages.append({"role": "assistant", "content": decision})
    return tokenizer.apply_chat_template(messages, tokenize=False)


class LearnedJudge:
    """A reward model folder (`AutoModelForSequenceClassification`, one label) with its tokenizer."""

    def __init__(self, path: str, device: str = "cpu", batch_size: int = 32, max_length: int = 1024) -> None:
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        self.path, self.device, self.batch_size, self.max_length = str(path), device, batch_size, max_length
        self.tokenizer = AutoTokenizer.from_pretrained(self.path)
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.model = AutoModelForSequenceClassification.from_pretrained(self.path, num_labels=1).to(device).eval()
        if self.model.config.pad_token_id is None:
            self.model.config.pad_token_id = self.tokenizer.pad_token_id
        self._torch = torch

    def logits(self, texts: Sequence[str]) -> list[float]:
        out: list[float] = []
        torch = self._torch
        for i in range(0, len(texts), self.batch_size):
            batch = self.tokenizer(list(texts[i:i + self.batch_size]), return_tensors="pt", padding=True,
                                   truncation=True, max_length=self.max_length).to(self.device)
            with torch.no_grad():
                out.extend(self.model(**batch).logits[:, 0].float().cpu().tolist())
        return out

    def score(self, prompts: Sequence[Sequence[dict[str, str]]], decisions: Sequence[object]) -> list[float | None]:
        """Sigmoid scores, None for an unparseable decision."""
        texts = [completion_text(d) for d in decisions]
        keep = [i for i, t in enumerate(texts) if Decision.parse(t).action is not None]
        logits = self.logits([judge_text(self.tokenizer, prompts[i], texts[i]) for i in keep]) if keep else []
        out: list[float | None] = [None] * len(texts)
        for i, z in zip(keep, logits, strict=True):
            out[i] = round(1.0 / (1.0 + math.exp(-z)), 6)
        return out


@cache
def _judge(path: str, device: str) -> LearnedJudge:
    return LearnedJudge(path, device=device)


@register_reward("learned_judge", kind="judge")
def learned_judge_reward(path: str, device: str = "cpu") -> Callable[..., list[float | None]]:
    """The learned judge as a TRL reward function: reads the `prompts` TRL passes (else renders the planner prompt
    from the `ledger` column, without a system turn). The `judge` reward picks it when given a `path`."""

    def judge_reward(completions: Sequence[object], **kwargs: Any) -> list[float | None]:
        prompts = kwargs.get("prompts")
        if prompts is None:
            prompts = [render_planner_messages(load_ledger(v), system_prompt=False) for v in kwargs["ledger"]]
        return _judge(str(path), device).score(prompts, completions)

    judge_reward.__name__ = "judge_reward"
    return judge_reward

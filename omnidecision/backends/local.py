"""The planner in-process: a transformers checkpoint decoded with xgrammar, the engine vLLM's structured outputs use.

    omnidecision eval --config configs/eval/synthetic-tiny-local.yaml --backends.planner.model runs/demo/models/sft

Kind `local` (`BackendSpec.model` = a planner folder: a full checkpoint or a LoRA adapter, loaded by
`modeling.load_planner` in float32). It exists for the replicate grid of the experiment: a served evaluation spends
≈ 33 s of its ≈ 60 s starting vLLM (docs/research/timing.md, "Evaluating many replicates"), and the replicates are full
fine-tunes, so one server cannot serve them all. What vLLM's OpenAI endpoint does, this does the same way:
- the prompt is the checkpoint's chat template with `chat_template_kwargs` (`enable_thinking`, train/serve
  parity), tokenized without special tokens added (vLLM's chat endpoint);
- a request's JSON schema is compiled by xgrammar from the same tokenizer info, with vLLM's
  `disable_any_whitespace` flags (`any_whitespace=False`, separators `,` `:`); the stop tokens are the checkpoint's
  generation_config EOS ids, left out of the text;
- greedy decoding is the argmax of the masked float32 logits; with `temperature > 0` a token is drawn from a
  generator seeded per request by (options.seed, run id, sample, call number), so a rerun draws the same.
Requests are decoded one at a time, in arrival order, whatever the agent's concurrency: a decision never depends on
what else is in flight (vLLM's batching can move a near-tie argmax), so an evaluation reproduces.
tests/serving/test_vllm_parity.py checks token-for-token agreement with a real vLLM server under the action schema.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import threading
import time
from pathlib import Path
from typing import Any

from omnidecision.backends.factory import register_backend
from omnidecision.modeling import load_planner
from omnidecision.protocol.chat import BackendError, BackendSpec, ChatRequest, ChatResponse, Usage

logger = logging.getLogger(__name__)

SEPARATORS = (",", ":")  # vLLM's separators under disable_any_whitespace (backend_xgrammar.py)
OPTIONS = ("seed",)  # the options a `local` spec takes


def local_problem(spec: BackendSpec) -> str | None:
    """Why `LocalPlannerBackend(spec)` would refuse the spec, or None; reads no weights (they load on the first
    request, so a dry run may ask this): `model` unset, not a folder, a folder that holds neither a checkpoint
    (config.json) nor a LoRA adapter (adapter_config.json), an option it does not take, a seed that is no integer."""
    if not spec.model:
        return "backend kind 'local' needs `model`: the planner folder to load"
    folder = Path(spec.model)
    if not folder.exists():
        return f"backend kind 'local': model folder {spec.model} does not exist"
    if not folder.is_dir():
        return f"backend kind 'local': model {spec.model} is a file, not a planner folder"
    if not (folder / "config.json").is_file() and not (folder / "adapter_config.json").is_file():
        return (f"backend kind 'local': model folder {spec.model} holds no config.json (a checkpoint) and no "
                "adapter_config.json (a LoRA adapter)")
    unknown = sorted(set(spec.options) - set(OPTIONS))
    if unknown:
        return f"backend kind 'local': unknown options {unknown} (known: {list(OPTIONS)})"
    try:
        int(spec.options.get("seed", 0))
    except (TypeError, ValueError):
        return f"backend kind 'local': options.seed must be an integer, got {spec.options['seed']!r}"
    return None


class LocalPlannerBackend:
    """`ChatBackend` over a transformers model in this process (see the module docstring)."""

    def __init__(self, spec: BackendSpec) -> None:
        if (problem := local_problem(spec)) is not None:
            raise ValueError(problem)
        self.spec = spec
        self.seed = int(spec.options.get("seed", 0))
        self._lock = threading.Lock()  # one decode at a time (see the module docstring)
        self._loaded: tuple[Any, Any, Any, list[int]] | None = None
        self._grammars: dict[str, Any] = {}
        self._calls: dict[tuple[str, int], int] = {}

    def _load(self) -> tuple[Any, Any, Any, list[int]]:
        """(model, tokenizer, grammar compiler, stop token ids), loaded on the first request."""
        if self._loaded is None:
            import torch
            import xgrammar as xgr

            model, tok = load_planner(self.spec.model, dtype=torch.float32)
            eos = model.generation_config.eos_token_id
            stop = sorted(set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
                          | ({tok.eos_token_id} if tok.eos_token_id is not None else set()))
            info = xgr.TokenizerInfo.from_huggingface(tok, vocab_size=model.config.vocab_size)
            self._loaded = (model, tok, xgr.GrammarCompiler(info, max_threads=1), stop)
            logger.info("local planner %s loaded (stop ids %s)", self.spec.model, stop)
        return self._loaded

    def _grammar(self, schema: dict[str, Any]) -> Any:
        # the schema as vLLM receives it: key order is part of the grammar (properties are emitted in that order)
        key = json.dumps(schema)
        if key not in self._grammars:
            compiler = self._load()[2]
            self._grammars[key] = compiler.compile_json_schema(key, any_whitespace=False, separators=SEPARATORS)
        return self._grammars[key]

    def _generator(self, request: ChatRequest) -> Any:
        import torch

        run, sample = str(request.context.get("run_id", "")), int(request.context.get("sample", 0) or 0)
        n = self._calls.get((run, sample), 0)
        self._calls[(run, sample)] = n + 1
        digest = hashlib.sha256(f"{self.seed}:{run}:{sample}:{n}".encode()).digest()
        return torch.Generator().manual_seed(int.from_bytes(digest[:8], "little"))

    def decode(self, request: ChatRequest) -> tuple[list[int], int, str]:
        """(completion token ids without the stop token, prompt tokens, finish reason) for one request."""
        import torch
        import xgrammar as xgr

        model, tok, _, stop = self._load()
        text = tok.apply_chat_template(request.messages, tokenize=False, add_generation_prompt=True,
                                       enable_thinking=self.spec.enable_thinking)
        ids = tok(text, add_special_tokens=False, return_tensors="pt")["input_ids"]
        matcher = bitmask = None
        if self.spec.structured_output and request.json_schema is not None:
            matcher = xgr.GrammarMatcher(self._grammar(request.json_schema), override_stop_tokens=stop)
            bitmask = xgr.allocate_token_bitmask(1, model.config.vocab_size)
        gen = self._generator(request) if self.spec.temperature > 0 else None
        out: list[int] = []
        past, step_ids, reason = None, ids, "length"
        with torch.inference_mode():
            for _ in range(self.spec.max_tokens):
                res = model(input_ids=step_ids, past_key_values=past, use_cache=True)
                past = res.past_key_values
                logits = res.logits[:, -1, :].float()
                if matcher is not None:
                    matcher.fill_next_token_bitmask(bitmask)
                    xgr.apply_token_bitmask_inplace(logits, bitmask)
                token = self._pick(logits[0], gen)
                if matcher is not None and not matcher.accept_token(token):
                    raise BackendError(f"local planner: the grammar refused token {token} it admitted")
                if token in stop:
                    reason = "stop"
                    break
                out.append(token)
                if matcher is not None and matcher.is_terminated():
                    reason = "stop"
                    break
                step_ids = torch.tensor([[token]])
        return out, int(ids.shape[1]), reason

    def _pick(self, logits: Any, gen: Any) -> int:
        import torch

        if gen is None:
            return int(torch.argmax(logits))
        probs = torch.softmax(logits / self.spec.temperature, dim=-1)
        if self.spec.top_p < 1.0:  # nucleus: keep the smallest prefix of the sorted mass that reaches top_p
            sorted_p, order = torch.sort(probs, descending=True)
            keep = torch.cumsum(sorted_p, dim=-1) - sorted_p < self.spec.top_p
            probs = torch.zeros_like(probs).scatter(0, order[keep], sorted_p[keep])
        return int(torch.multinomial(probs, 1, generator=gen))

    def _chat(self, request: ChatRequest) -> ChatResponse:
        t = time.perf_counter()
        with self._lock:
            try:
                tokens, prompt_tokens, _ = self.decode(request)
            except BackendError:
                raise
            except Exception as exc:  # a broken checkpoint or schema is this backend's failure, with its cause
                raise BackendError(f"local planner {self.spec.model}: {type(exc).__name__}: {exc}") from exc
            text = self._loaded[1].decode(tokens, skip_special_tokens=True)
        return ChatResponse(text=text, usage=Usage(prompt_tokens=prompt_tokens, completion_tokens=len(tokens)),
                            latency_s=time.perf_counter() - t, model=self.spec.model)

    async def chat(self, request: ChatRequest) -> ChatResponse:
        return await asyncio.to_thread(self._chat, request)


@register_backend("local", check=local_problem)
def build_local(spec: BackendSpec) -> LocalPlannerBackend:
    return LocalPlannerBackend(spec)

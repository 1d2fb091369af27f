# Shared pieces of the SLURM scripts (sourced, not run): the request check, the rendezvous address, redacted echo.
#
#   source "${SLURM_SUBMIT_DIR:-$(dirname "$0")/../..}/scripts/slurm/lib.sh"
#
# Inside a job the script runs from a copy in slurmd's spool folder, so it finds this file through the submit folder
# (the project's root: every documented `sbatch` line runs from there).

# od_check_request NAME SCRIPT [ARGS...]: outside an allocation, ask the scheduler (`sbatch --test-only`) whether the
# script's own #SBATCH request (with the SBATCH_* variables and OD_SBATCH_ARGS applied) can ever start, and refuse in
# one line, with what the partition offers, when it cannot: a job that asks more than any node has stays PENDING
# forever (Reason=PartitionConfig) with no word to the user. Without a reachable scheduler the check says so.
od_check_request() {
  local name=$1 script=$2; shift 2
  if [[ -n "${SLURM_JOB_ID:-}" ]]; then return 0; fi  # inside an allocation the request was granted
  if ! command -v sbatch >/dev/null 2>&1; then
    echo "$name: resources not checked: no sbatch here (run the dry run where jobs are submitted)" >&2
    return 0
  fi
  local out
  # shellcheck disable=SC2086  # OD_SBATCH_ARGS is a list of sbatch options, split on purpose
  if out=$(sbatch --test-only ${OD_SBATCH_ARGS:-} "$script" "$@" 2>&1); then
    echo "$name: resources ok: ${out##*sbatch: }" >&2
    return 0
  fi
  # only the scheduler's own verdicts on the request refuse; anything else (no slurm.conf here, a controller that
  # does not answer) leaves the request unchecked, and says so
  if ! grep -qE "node configuration is not available|Invalid generic resource|Invalid partition|More processors requested|Memory required by task is not available|time limit|Node count specification invalid|not available in partition" <<< "$out"; then
    echo "$name: resources not checked: sbatch --test-only said: ${out//$'\n'/ }" >&2
    return 0
  fi
  local offer
  offer=$(sinfo -h -o '%P: %D nodes, %c CPUs and %m MB a node, gres %G, time limit %l' 2>/dev/null | tr '\n' ';')
  echo "$name: the scheduler would never start this request (${out//$'\n'/ }); the partitions offer: ${offer%;};" \
       "pass smaller sbatch options (e.g. OD_SBATCH_ARGS='--cpus-per-task=1 --mem=2G' for this check, the same" \
       "options to sbatch)" >&2
  return 2
}

# od_master_addr NODE: the address to rendezvous on: the node's NodeAddr as the controller knows it (a cluster whose
# node names are not host names, such as scripts/slurm/local-cluster.sh's n1/n2 on 127.0.0.1, still works), checked
# to resolve before every node waits on it.
od_master_addr() {
  local node=$1 addr
  addr=$(scontrol show node "$node" 2>/dev/null | sed -n 's/.*NodeAddr=\([^ ]*\).*/\1/p' | head -n 1)
  addr=${addr:-$node}
  if ! getent hosts "$addr" >/dev/null 2>&1 && [[ ! "$addr" =~ ^[0-9.]+$ ]]; then
    echo "the rendezvous address $addr (node $node) does not resolve on $(hostname): set MASTER_ADDR" >&2
    return 2
  fi
  echo "$addr"
}

# od_kill_wait: the seconds a job has between SLURM's SIGTERM and its SIGKILL: the cluster's KillWait (`scontrol show
# config`), plus the GraceTime of the job's partition inside a job (a preemption sends SIGTERM, then waits GraceTime
# before it cancels the job; 0 on most partitions); 30 (SLURM's default KillWait) where no scheduler answers (a dry
# run away from the cluster). The GPU path exports it as TORCH_ELASTIC_SHUTDOWN_TIMEOUT: torchrun's agent under
# `accelerate launch` SIGKILLs its workers that long after a SIGTERM (30 s when unset; a torch that predates the
# variable ignores it and keeps 30 s), so a SIGTERM checkpoint may use all of SLURM's time.
od_kill_wait() {
  local wait grace=0
  # `|| true`: no scheduler is an answer here (the default), not an error under the scripts' `set -e -o pipefail`
  wait=$( (scontrol show config 2>/dev/null || true) | sed -n 's/^KillWait *= *\([0-9][0-9]*\).*/\1/p' | head -n 1)
  if [[ -n "${SLURM_JOB_PARTITION:-}" ]]; then
    grace=$( (scontrol show partition "$SLURM_JOB_PARTITION" 2>/dev/null || true) |
             sed -n 's/.*GraceTime=\([0-9][0-9]*\).*/\1/p' | head -n 1)
  fi
  echo $(( ${wait:-30} + ${grace:-0} ))
}

# od_echo LINE...: print a command line with every secret hidden by value (the project's redaction: the values of
# *_TOKEN/*_KEY variables, --hub_token-like options and provider key shapes), so a log never holds a key.
od_echo() {
  local py=${PYTHON:-python}
  printf '%s' "$*" | "$py" -c 'import sys
from omnidecision.protocol.redaction import credential_args, redact_text, register, register_in
line = sys.stdin.read()
words = line.replace(chr(34), " ").replace(chr(39), " ").split()  # inner bash -c lines too
register(credential_args(words))
register_in(words)  # provider key shapes (sk-..., hf_..., ...) wherever they stand
print(redact_text(line))'
}

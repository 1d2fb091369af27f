#!/bin/bash
# A real two-node SLURM cluster on this one machine, for trying the project's SLURM scripts and for the tests.
#
#   bash scripts/slurm/local-cluster.sh up       # install what is missing (root + apt), write the config, start
#                                                 # munged, slurmctld and two slurmd (n1, n2), wait until both are idle
#   eval "$(bash scripts/slurm/local-cluster.sh env)"   # SLURM_CONF for sbatch/squeue/scontrol in this shell
#   bash scripts/slurm/local-cluster.sh status   # the daemons it started and `sinfo`
#   bash scripts/slurm/local-cluster.sh down     # stop exactly the daemons it started (by their pid files)
#
# Everything lives in one state folder (OD_SLURM_DIR, default runs/slurm-local under the project): slurm.conf,
# its own munge key and socket (the machine's munge, if any, is left alone), spool and state folders, logs and pid
# files. Two nodes on 127.0.0.1 with their own ports; CPUs only; no cgroups (proctrack/linuxproc, task/none), so it
# runs as root in a container. The knobs (environment): OD_SLURM_CPUS (CPUs a node; default: this machine's),
# OD_SLURM_MEM_MB (memory a node; default 8000), OD_SLURM_PORT (first of four ports; default 17000),
# OD_SLURM_KILL_WAIT (seconds between SIGTERM and SIGKILL when a job is cancelled or preempted; default 30).
# Facts behind it (Debian 12's slurm-wlm 22.05 and munge): docs/cluster/local-cluster.md.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DIR=${OD_SLURM_DIR:-$ROOT/runs/slurm-local}
CPUS=${OD_SLURM_CPUS:-$(nproc)}
MEM=${OD_SLURM_MEM_MB:-8000}
PORT=${OD_SLURM_PORT:-17000}
KILL_WAIT=${OD_SLURM_KILL_WAIT:-30}
NODES=(n1 n2)
CONF=$DIR/slurm.conf
SOCKET=$DIR/munge/munge.socket

say() { echo "local-cluster: $*" >&2; }
die() { say "$*"; exit 1; }

install_missing() {
  local missing=()
  for cmd in slurmctld slurmd sbatch munged; do
    command -v "$cmd" >/dev/null 2>&1 || PATH=$PATH:/usr/sbin command -v "$cmd" >/dev/null 2>&1 || missing+=("$cmd")
  done
  [[ ${#missing[@]} == 0 ]] && return 0
  if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1; then
    say "installing slurm-wlm and munge (missing: ${missing[*]})"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q slurm-wlm munge >/dev/null 2>&1 \
      || { apt-get update -q >/dev/null && apt-get install -y -q slurm-wlm munge >/dev/null; }
  else
    die "missing ${missing[*]}: install the distribution's slurm-wlm and munge packages (as root: apt-get install slurm-wlm munge)"
  fi
}

write_config() {
  mkdir -p "$DIR"/{munge,state,log,pids} "${NODES[@]/#/$DIR/spool/}"
  local host; host=$(hostname)
  cat > "$CONF" <<EOF
# written by scripts/slurm/local-cluster.sh: two nodes on 127.0.0.1, CPUs only
ClusterName=od-local
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# cred_expire also sets how long a requeued job waits before it may start again (default 120 s)
AuthInfo=socket=$SOCKET,cred_expire=10
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool/%n
SlurmctldPidFile=$DIR/pids/slurmctld.pid
SlurmdPidFile=$DIR/pids/slurmd-%n.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
# a short scheduling interval: the tests wait on requeued and dependent jobs
SchedulerParameters=sched_interval=2,bf_interval=2
# a job that names no memory gets a share, not the whole node
DefMemPerCPU=$((MEM / CPUS / 2))
MinJobAge=3600
KillWait=$KILL_WAIT
NodeName=n1 NodeHostname=$host NodeAddr=127.0.0.1 Port=$((PORT + 2)) CPUs=$CPUS RealMemory=$MEM State=UNKNOWN
NodeName=n2 NodeHostname=$host NodeAddr=127.0.0.1 Port=$((PORT + 3)) CPUs=$CPUS RealMemory=$MEM State=UNKNOWN
PartitionName=debug Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
}

pid_alive() { [[ -f "$1" ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

start_munge() {
  pid_alive "$DIR/pids/munged.pid" && return 0
  if [[ ! -s "$DIR/munge/munge.key" ]]; then
    head -c 1024 /dev/urandom > "$DIR/munge/munge.key"
  fi
  chmod 700 "$DIR/munge"; chmod 400 "$DIR/munge/munge.key"
  # --force: munged as root, in a folder it does not own by its own rules (the key is this cluster's alone)
  /usr/sbin/munged --force --socket="$SOCKET" --key-file="$DIR/munge/munge.key" \
    --pid-file="$DIR/pids/munged.pid" --log-file="$DIR/log/munged.log" --seed-file="$DIR/munge/munged.seed"
  for _ in $(seq 50); do [[ -S "$SOCKET" ]] && return 0; sleep 0.1; done
  die "munged did not start (see $DIR/log/munged.log)"
}

start_slurm() {
  export SLURM_CONF=$CONF
  pid_alive "$DIR/pids/slurmctld.pid" || /usr/sbin/slurmctld -f "$CONF"
  for node in "${NODES[@]}"; do
    pid_alive "$DIR/pids/slurmd-$node.pid" || /usr/sbin/slurmd -f "$CONF" -N "$node"
  done
  # both nodes idle (or mixed/allocated when jobs from before a restart are still there), at most a minute
  for _ in $(seq 120); do
    local states; states=$(sinfo -h -N -o '%N %t' 2>/dev/null | sort -u | awk '{print $2}' | sort -u | tr '\n' ' ')
    if [[ -n "$states" && ! "$states" =~ (down|unk|drain|fail|\*) ]]; then
      say "up: 2 nodes ($CPUS CPUs, $MEM MB each), SLURM_CONF=$CONF"
      return 0
    fi
    sleep 0.5
  done
  sinfo -N >&2 || true
  die "the nodes did not come up within 60 s (logs in $DIR/log)"
}

stop_all() {
  local pids=() f pid
  for f in "$DIR"/pids/slurmd-*.pid "$DIR/pids/slurmctld.pid" "$DIR/pids/munged.pid"; do
    local pid; pid=$(cat "$f" 2>/dev/null) || continue  # a daemon removes its own pid file as it stops
    if kill -0 "$pid" 2>/dev/null; then kill -TERM "$pid"; pids+=("$pid"); fi
  done
  for _ in $(seq 100); do
    local alive=0 p
    for p in "${pids[@]}"; do if kill -0 "$p" 2>/dev/null; then alive=1; fi; done
    [[ $alive == 0 ]] && break
    sleep 0.1
  done
  for p in "${pids[@]}"; do if kill -0 "$p" 2>/dev/null; then kill -KILL "$p"; fi; done
  rm -f "$DIR"/pids/*.pid
  # the job steps' own processes belong to the slurmstepd of each job, which ends with its job; a job still
  # running when the daemons stop is killed by its slurmstepd (no orphan is left: status lists what runs)
  say "down"
}

case "${1:-}" in
  up)
    install_missing
    PATH=$PATH:/usr/sbin
    write_config
    start_munge
    start_slurm
    ;;
  down) stop_all ;;
  env) echo "export SLURM_CONF=$CONF" ;;
  status)
    for f in "$DIR"/pids/*.pid; do
      [[ -f "$f" ]] || continue
      if kill -0 "$(cat "$f")" 2>/dev/null; then echo "$(basename "$f" .pid) $(cat "$f") running"
      else echo "$(basename "$f" .pid) $(cat "$f") dead"; fi
    done
    [[ -f "$CONF" ]] && SLURM_CONF=$CONF sinfo -N 2>/dev/null || true
    ;;
  *) echo "usage: $0 up|down|status|env" >&2; exit 2 ;;
esac

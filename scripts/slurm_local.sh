#!/usr/bin/env bash
# A one-machine Slurm "cluster" that launches bertfit the way a Slurm cluster does: installs
# Debian's slurm-wlm (and munge, its authentication) when missing, starts munged, slurmctld and
# slurmd with a private configuration (nothing written under /etc/slurm), trains a tiny
# DistilBERT on GLUE MRPC as 2 tasks of `srun --mpi=pmix` (PMIx is how Slurm hands Open MPI
# its ranks: no mpirun, no ssh, no hostfile), checks that the job ran as 2 ranks and that a
# plain `srun` (no PMIx) is refused, and stops the daemons it started. Needs root (slurmd starts the tasks). Not part of ctest: it installs
# packages and starts system daemons.
#
#   scripts/slurm_local.sh [--mpi pmix|pmi2] [--keep-up] [--work DIR] [-- extra train flags]
#
# Ports 6817 (slurmctld) and 6818 (slurmd) on this host; logs in WORK/*.log.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
mpi=pmix keep_up=0 work=/tmp/bertfit-slurm extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --mpi) mpi=$2; shift 2 ;;
    --keep-up) keep_up=1; shift ;;
    --work) work=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    *) echo "slurm_local: unknown option $1" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "slurm_local: needs root (slurmd starts the job's tasks)" >&2; exit 2; }
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v srun >/dev/null; then
  echo "slurm_local: installing Debian's slurm-wlm" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm >/dev/null
fi
bertfit=${BERTFIT:-$repo/build/release/apps/bertfit/bertfit}  # BERTFIT: another build
[ -x "$bertfit" ] || bash scripts/build.sh release bertfit >/dev/null
data=$(cd "$repo/../shared/data/glue/MRPC" && pwd)

mkdir -p "$work/state" "$work/spool"
conf=$work/slurm.conf
host=$(hostname -s)
cpus=$(nproc)
# One node (this host) with all its cores, one partition; no cgroups (containers often lack
# the delegation slurmd wants): processes are tracked through /proc and not confined.
cat >"$conf" <<EOF
ClusterName=bertfit-local
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
SchedulerType=sched/builtin
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=local Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
export SLURM_CONF=$conf

started=()
stop_daemons() {
  [ "$keep_up" = 1 ] && { echo "slurm_local: left running (SLURM_CONF=$conf)" >&2; return; }
  local pid
  for pid in "${started[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${started[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true  # slurmd ignores SIGTERM while it retries registering
  done
}
trap stop_daemons EXIT

# munge: Debian's package creates the key; its daemon runs as the munge user.
if ! munge -n </dev/null >/dev/null 2>&1; then
  mkdir -p /run/munge && chown munge:munge /run/munge
  runuser -u munge -- /usr/sbin/munged
  for _ in $(seq 50); do [ -s /run/munge/munged.pid ] && break; sleep 0.1; done
  started+=("$(cat /run/munge/munged.pid)")
fi
for daemon in slurmctld slurmd; do
  if [ -s "$work/$daemon.pid" ] && kill -0 "$(cat "$work/$daemon.pid")" 2>/dev/null; then
    echo "slurm_local: $daemon already running (pid $(cat "$work/$daemon.pid"))" >&2
    continue
  fi
  rm -f "$work/$daemon.pid"
  /usr/sbin/$daemon -f "$conf"
  for _ in $(seq 100); do [ -s "$work/$daemon.pid" ] && break; sleep 0.1; done
  [ -s "$work/$daemon.pid" ] || { echo "slurm_local: $daemon did not start; see $work/$daemon.log" >&2; exit 1; }
  started+=("$(cat "$work/$daemon.pid")")
done
# Wait for the node to register as idle.
for _ in $(seq 100); do
  sinfo -h -o %t 2>/dev/null | grep -qx idle && break
  sleep 0.2
done
sinfo -h -o "slurm_local: partition %P, node %N, state %t, %c CPUs" >&2
srun --mpi=list 2>&1 | grep -q "$mpi" || { echo "slurm_local: srun has no --mpi=$mpi plugin" >&2; exit 1; }

run=$work/run
rm -rf "$run"
mkdir -p "$run"
"$bertfit" init --arch distilbert --output "$run/model" --seed 1 --set n_layers=2 --set dim=64 \
  --set hidden_dim=128 --set n_heads=2 >/dev/null
# Two tasks on this node, one core each; Open MPI's byte transfer over TCP on loopback, as the
# tests launch it (no shared-memory segment needed).
echo "slurm_local: srun --mpi=$mpi -n 2 bertfit train ..." >&2
OMPI_MCA_btl=self,tcp OMPI_MCA_btl_tcp_if_include=lo \
  srun --mpi="$mpi" -N 1 -n 2 --cpus-per-task=1 --time=10 --kill-on-bad-exit=1 \
  "$bertfit" train --model "$run/model" --output "$run/out" --task mrpc --data "$data" \
  --batch-size 8 --max-seq-len 64 --max-steps 6 --lr 1e-3 --eval-every end --log-every 2 \
  "${extra[@]}" 2>&1 | tee "$run/train.log"
# The job ran as 2 ranks of one data-parallel run: rank 0's log says so and its checkpoint
# records the world size.
grep -q "rank 0 of 2" "$run/train.log" || { echo "slurm_local: FAIL: no 'rank 0 of 2' in the log" >&2; exit 1; }
world=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["world"])' "$run/out/checkpoint/trainer_state.json")
[ "$world" = 2 ] || { echo "slurm_local: FAIL: the checkpoint's world is $world, not 2" >&2; exit 1; }
[ -s "$run/out/model.safetensors" ] || { echo "slurm_local: FAIL: no model written" >&2; exit 1; }
# Without PMIx the tasks learn no ranks: bertfit must refuse rather than train twice alone.
if srun --mpi=none -N 1 -n 2 --time=2 "$bertfit" train --model "$run/model" --output "$run/alone" \
  --task mrpc --data "$data" --max-steps 1 >"$run/refused.log" 2>&1; then
  echo "slurm_local: FAIL: srun --mpi=none was not refused" >&2; exit 1
fi
grep -q "launch with \`srun --mpi=pmix\`" "$run/refused.log" ||
  { echo "slurm_local: FAIL: srun --mpi=none refused without naming --mpi=pmix:" >&2; cat "$run/refused.log" >&2; exit 1; }
[ ! -e "$run/alone" ] || { echo "slurm_local: FAIL: the refused run wrote $run/alone" >&2; exit 1; }
echo "slurm_local: ok: srun --mpi=$mpi ran a 2-rank training (model in $run/out); srun --mpi=none was refused" >&2

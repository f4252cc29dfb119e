#!/usr/bin/env bash
# A single-node Slurm cluster for CI and for trying the deploy/slurm templates on one machine: munged,
# slurmctld and slurmd from Debian's packages, run as root with every file in one temporary directory, no
# systemd, no cgroups, no accounting. Source it, then:
#
#   slurm_up        installs slurmctld slurmd slurm-client munge if missing, starts the daemons, waits for
#                   the node to be idle, and exports SLURM_CONF
#   slurm_wait ID.. waits until the jobs have left the queue
#   slurm_state ID  prints each task's JobState and ExitCode (scontrol: there is no accounting database)
#   slurm_down      cancels what is left and stops the daemons; keeps the directory (and prints the log
#                   tails) when SLURM_KEEP=1
#
# Settings that matter, each for an error met without it: the state directory 0755 (munged refuses a socket
# directory others cannot traverse), slurmd started only once slurmctld answers, batch_sched_delay=0 (array
# tasks otherwise start in waves 3 s apart), kill_invalid_depend (a merge whose shard failed would otherwise
# pend forever), the node's memory at 90% of what slurmd measures (more drains the node).

slurm_log() { printf '[slurm %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

slurm_up() {
  if [ "$(id -u)" != 0 ]; then slurm_log "needs root (the daemons run as root here)"; return 1; fi
  if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v sbatch >/dev/null \
     || ! command -v munged >/dev/null; then
    slurm_log "installing slurmctld slurmd slurm-client munge"
    local made_policy=0
    if [ ! -e /usr/sbin/policy-rc.d ]; then
      # Keep the packages' scripts from starting system-wide daemons.
      printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d && made_policy=1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends slurmctld slurmd slurm-client munge >/dev/null \
      || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
             slurmctld slurmd slurm-client munge >/dev/null; }
    local installed=$?
    [ "$made_policy" = 1 ] && rm -f /usr/sbin/policy-rc.d
    [ "$installed" = 0 ] || { slurm_log "apt-get install failed"; return 1; }
  fi
  SLURM_DIR=$(mktemp -d /tmp/slurm-ci.XXXXXX)
  chmod 755 "$SLURM_DIR"
  mkdir -p "$SLURM_DIR"/munge "$SLURM_DIR"/state "$SLURM_DIR"/spool "$SLURM_DIR"/log
  chmod 755 "$SLURM_DIR"/munge
  export SLURM_CONF="$SLURM_DIR/slurm.conf"
  local node port_ctld port_d spec mem hw
  node=$(hostname -s)
  port_ctld=$(slurm_free_port 6817)
  port_d=$(slurm_free_port $((port_ctld + 1)))
  spec=$(slurmd -C | head -1)
  mem=$(sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' <<<"$spec")
  hw=$(sed -e 's/^NodeName=[^ ]* //' -e 's/ RealMemory=[0-9]*//' <<<"$spec")
  cat > "$SLURM_CONF" <<CONF
ClusterName=ci
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$port_ctld
SlurmdPort=$port_d
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SLURM_DIR/munge/munge.sock
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$SLURM_DIR/state
SlurmdSpoolDir=$SLURM_DIR/spool
SlurmctldPidFile=$SLURM_DIR/slurmctld.pid
SlurmdPidFile=$SLURM_DIR/slurmd.pid
SlurmctldLogFile=$SLURM_DIR/log/slurmctld.log
SlurmdLogFile=$SLURM_DIR/log/slurmd.log
PlugStackConfig=$SLURM_DIR/plugstack.conf
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0,kill_invalid_depend
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
NodeName=$node NodeAddr=127.0.0.1 $hw RealMemory=$((mem * 9 / 10)) State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
  : > "$SLURM_DIR/plugstack.conf"
  mungekey -c -k "$SLURM_DIR/munge/munge.key" 2>/dev/null \
    || dd if=/dev/urandom of="$SLURM_DIR/munge/munge.key" bs=1024 count=1 status=none
  chmod 600 "$SLURM_DIR/munge/munge.key"
  munged -F -S "$SLURM_DIR/munge/munge.sock" --key-file="$SLURM_DIR/munge/munge.key" \
    --pid-file="$SLURM_DIR/munge/munged.pid" --seed-file="$SLURM_DIR/munge/munged.seed" \
    >"$SLURM_DIR/log/munged.out" 2>&1 &
  SLURM_PID_MUNGE=$!
  local i
  for i in $(seq 1 50); do [ -S "$SLURM_DIR/munge/munge.sock" ] && break; sleep 0.1; done
  slurmctld -D -f "$SLURM_CONF" >"$SLURM_DIR/log/slurmctld.out" 2>&1 &
  SLURM_PID_CTLD=$!
  for i in $(seq 1 150); do
    scontrol ping 2>/dev/null | grep -q 'is UP' && break
    sleep 0.1
  done
  scontrol ping 2>/dev/null | grep -q 'is UP' || { slurm_log "slurmctld does not answer"; return 1; }
  slurmd -D -N "$node" -f "$SLURM_CONF" >"$SLURM_DIR/log/slurmd.out" 2>&1 &
  SLURM_PID_SLURMD=$!
  for i in $(seq 1 300); do
    [ "$(sinfo -h -n "$node" -o %t 2>/dev/null)" = idle ] && break
    sleep 0.2
  done
  [ "$(sinfo -h -n "$node" -o %t 2>/dev/null)" = idle ] || { slurm_log "node $node is not idle"; return 1; }
  slurm_log "up: node $node idle, $(sinfo -h -o %c) CPUs, state in $SLURM_DIR"
}

slurm_free_port() {
  local p
  for p in $(seq "$1" $(($1 + 200))); do
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return 0; fi
  done
  return 1
}

slurm_wait() {
  local ids i
  ids=$(IFS=,; echo "$*")
  for i in $(seq 1 36000); do
    [ -z "$(squeue -h -j "$ids" 2>/dev/null)" ] && return 0
    sleep 0.5
  done
  slurm_log "jobs $ids still queued after 5 h"; return 1
}

slurm_state() {
  scontrol -o show job "$1" | grep -oE 'ArrayTaskId=[0-9]+|JobState=[A-Z_]+|ExitCode=[0-9:]+' | paste -sd' ' \
    | sed 's/ ArrayTaskId=/\nArrayTaskId=/g'
}

slurm_stop_pid() {
  local pid=$1 i
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null
  for i in $(seq 1 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null || true
}

slurm_down() {
  [ -n "${SLURM_DIR:-}" ] || return 0
  scancel --quiet --user=root 2>/dev/null || true
  slurm_stop_pid "${SLURM_PID_SLURMD:-}"
  slurm_stop_pid "${SLURM_PID_CTLD:-}"
  slurm_stop_pid "${SLURM_PID_MUNGE:-}"
  if [ "${SLURM_KEEP:-0}" = 1 ]; then
    for f in "$SLURM_DIR"/log/*; do [ -f "$f" ] && { echo "== $f"; tail -n 20 "$f"; }; done >&2
    slurm_log "down; kept $SLURM_DIR"
  else
    rm -rf "$SLURM_DIR"
    slurm_log "down"
  fi
  SLURM_DIR=
}

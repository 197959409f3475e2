#!/usr/bin/env bash
# A virtual multi-node Slurm cluster on this one Linux host, for the multi-node tests: each node
# is a network namespace with its own hostname, its own private /tmp (node-local scratch, as
# on a real cluster) and its own /dev/shm, joined by a bridge; one slurmctld, one slurmd per node,
# munge for auth.
# Everything else (/, /var, /work) is shared, like a cluster's shared filesystem.
#
#   scripts/vcluster.sh start [NODES]   (default 2) start munge, the nodes and Slurm; wait idle
#   scripts/vcluster.sh stop            stop every daemon, delete the namespaces and the bridge
#   scripts/vcluster.sh degrade NODE RATE [both|send|receive]
#                                       throttle NODE's link to RATE (tc tbf, e.g. 30mbit): send
#                                       shapes the node-side veth (what NODE sends), receive the
#                                       bridge-side veth (what NODE receives); default both
#   scripts/vcluster.sh restore NODE    remove NODE's throttle, both ends
#   scripts/vcluster.sh status          sinfo
#   scripts/vcluster.sh check           exit 0 if this host can run it (root, netns, slurm), else
#                                       print why and exit 77 (the tests skip with that reason)
#
# Nodes are vc-n1..vc-nN at 198.18.0.11.. (198.18.0.0/15 is set aside for benchmarks), the
# controller at 198.18.0.1 on the bridge vcbr0. State, logs and slurm.conf live in $VC_STATE
# (default /var/lib/trainproof-vcluster), outside /tmp, which each node replaces with its own.
# Needs root. Run `stop` from a trap: a failed test must not leave daemons or namespaces behind.
set -uo pipefail

VC_STATE=${VC_STATE:-/var/lib/trainproof-vcluster}
BRIDGE=vcbr0
NET=198.18.0
CTLD_PORT=16817
SLURMD_PORT=16818

say() { printf 'vcluster: %s\n' "$*" >&2; }

check() {
  [ "$(id -u)" -eq 0 ] || { echo "vcluster: needs root (network namespaces, slurmd)"; return 77; }
  local tool
  for tool in slurmctld slurmd srun sinfo munged ip nsenter unshare; do
    command -v "$tool" >/dev/null || { echo "vcluster: $tool is not installed (scripts/setup.sh)"; return 77; }
  done
  if [ "$(nproc)" -lt 2 ]; then
    echo "vcluster: needs 2 CPUs (each node is declared with 2, and the tests put 2 ranks on each)"
    return 77
  fi
  ip netns del vc-probe 2>/dev/null
  if ! ip netns add vc-probe 2>/dev/null; then
    echo "vcluster: cannot create network namespaces here (no CAP_SYS_ADMIN/CAP_NET_ADMIN?)"
    return 77
  fi
  ip netns del vc-probe
  # A route there through our own bridge is a cluster left running, which start replaces.
  if ip route | grep "^$NET\." | grep -vq "dev $BRIDGE"; then
    echo "vcluster: $NET.0/24 is already routed on this host; refusing to add a second route"
    return 77
  fi
  return 0
}

node_names() { seq -f "vc-n%g" 1 "$1" | paste -sd, -; }

write_conf() {
  local nodes=$1 i
  cat >"$VC_STATE/slurm.conf" <<EOF
ClusterName=trainproof-vc
SlurmctldHost=$(hostname)($NET.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
AuthType=auth/munge
# No SrunPortRange: srun's ports are the kernel's ephemeral ones. srun's socket for a queued
# allocation takes any SRUN_JOB_COMPLETE that reaches it, whichever job it names; in a range of
# 100 ports a new srun often binds a port a just-ended srun had, the controller's late message for
# that job arrives there, and the new srun cancels its own allocation ("Job has been cancelled",
# "Unable to allocate resources: No error"; docs/slurm.md).
# A requeued job waits out its old credentials before it may start again (120 s by default); a
# job started sooner is killed as "non-startable: Job credential revoked".
AuthInfo=cred_expire=30
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$VC_STATE/ctld-state
SlurmdSpoolDir=$VC_STATE/spool-%n
SlurmctldPidFile=$VC_STATE/slurmctld.pid
SlurmdPidFile=$VC_STATE/slurmd-%n.pid
SlurmctldLogFile=$VC_STATE/slurmctld.log
SlurmdLogFile=$VC_STATE/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=pmix
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
SchedulerType=sched/backfill
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
TaskProlog=$VC_STATE/task-prolog.sh
EOF
  write_task_prolog
  for i in $(seq 1 "$nodes"); do
    echo "NodeName=vc-n$i NodeAddr=$NET.$((10 + i)) CPUs=2 RealMemory=1000 State=UNKNOWN"
  done >>"$VC_STATE/slurm.conf"
  echo "PartitionName=vc Nodes=$(node_names "$nodes") Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4" \
    >>"$VC_STATE/slurm.conf"
}

# Every task's MPI goes over libfabric's tcp provider, not Open MPI 4.1's TCP BTL: that BTL's
# endpoint close can call an empty callback while connections are set up in MPI_Init, and the
# rank dies of SIGSEGV (docs/crash-report.md). Slurm applies the prolog's "export" lines to each
# task, so srun, sbatch and the templates all get the same transport.
write_task_prolog() {
  cat >"$VC_STATE/task-prolog.sh" <<'EOF'
#!/bin/sh
echo export OMPI_MCA_pml=cm
echo export OMPI_MCA_mtl=ofi
echo export OMPI_MCA_mtl_ofi_provider_exclude=shm
echo export OMPI_MCA_btl=self
echo "export FI_PROVIDER=tcp;ofi_rxm"
EOF
  chmod 755 "$VC_STATE/task-prolog.sh"
}

start_munge() {
  if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then return 0; fi
  [ -f /etc/munge/munge.key ] || { say "no /etc/munge/munge.key (reinstall munge)"; return 1; }
  mkdir -p /run/munge && chown munge:munge /run/munge
  su -s /bin/sh munge -c /usr/sbin/munged || return 1
  touch "$VC_STATE/munge.started-here"
  munge -n | unmunge >/dev/null
}

start() {
  local nodes=${1:-2} i node waited
  check >&2 || return $?
  stop 2>/dev/null
  mkdir -p "$VC_STATE/ctld-state"
  echo "$nodes" >"$VC_STATE/nodes"
  start_munge || { say "munge did not start"; return 1; }
  if ! { ip link add "$BRIDGE" type bridge && ip addr add "$NET.1/24" dev "$BRIDGE" &&
    ip link set "$BRIDGE" up; }; then
    say "cannot create the bridge $BRIDGE"
    return 1
  fi
  for i in $(seq 1 "$nodes"); do
    node=vc-n$i
    if ! { ip netns add "$node" &&
      ip link add "$node" type veth peer name eth0 netns "$node" &&
      ip link set "$node" master "$BRIDGE" up &&
      ip -n "$node" addr add "$NET.$((10 + i))/24" dev eth0 &&
      ip -n "$node" link set eth0 up && ip -n "$node" link set lo up; }; then
      say "cannot create node $node"
      return 1
    fi
    mkdir -p "$VC_STATE/spool-$node" "$VC_STATE/tmp-$node"
    chmod 1777 "$VC_STATE/tmp-$node"
  done
  write_conf "$nodes"
  slurmctld -f "$VC_STATE/slurm.conf" -i || { say "slurmctld did not start: $VC_STATE/slurmctld.log"; return 1; }
  for i in $(seq 1 "$nodes"); do
    node=vc-n$i
    # Only the network namespace is entered (ip netns exec would remount /sys without cgroups);
    # a private mount and UTS namespace give the node its own /tmp and hostname.
    # /dev/shm is the node's own too, empty at every start and gone with the node: Open MPI names
    # its shared-memory segments after the host and a hash of Slurm's job and step ids, which
    # restart at 1 with every new cluster, so in a shared /dev/shm a step could map the segment
    # that a killed step of an earlier cluster left under the same name.
    nsenter --net="/var/run/netns/$node" unshare --mount --uts --propagation private \
      sh -c "mount --bind '$VC_STATE/tmp-$node' /tmp &&
             mount -t tmpfs -o mode=1777,size=2g tmpfs /dev/shm && hostname $node &&
             exec slurmd -f '$VC_STATE/slurm.conf' -N $node" ||
      { say "slurmd on $node did not start: $VC_STATE/slurmd-$node.log"; return 1; }
  done
  for waited in $(seq 1 60); do
    if [ "$(sinfo -h -o '%t' 2>/dev/null | sort -u)" = idle ] &&
      [ "$(sinfo -h -N -o '%N' 2>/dev/null | wc -l)" -eq "$nodes" ]; then
      say "$nodes nodes idle after ${waited}s ($(node_names "$nodes"))"
      return 0
    fi
    sleep 1
  done
  say "the nodes did not come up idle within 60 s:"
  sinfo -N >&2
  return 1
}

export SLURM_CONF=$VC_STATE/slurm.conf

kill_pidfile() {
  local file=$1 pid
  [ -f "$file" ] || return 0
  pid=$(cat "$file" 2>/dev/null)
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then kill -9 "$pid" 2>/dev/null; fi
  fi
  rm -f "$file"
}

stop() {
  local file node
  for file in "$VC_STATE"/slurmd-*.pid "$VC_STATE"/slurmctld.pid; do kill_pidfile "$file"; done
  # Job steps left behind by a test (slurmstepd and the ranks it started) die with their nodes.
  for node in $(ip netns list 2>/dev/null | awk '/^vc-n[0-9]+/ {print $1}'); do
    ip netns pids "$node" 2>/dev/null | xargs -r kill -9 2>/dev/null
    # The host end of the veth goes now: after `netns del` the kernel removes it only later,
    # and a start right after would find the name taken.
    ip link del "$node" 2>/dev/null
    ip netns del "$node" 2>/dev/null
  done
  ip link del "$BRIDGE" 2>/dev/null
  if [ -f "$VC_STATE/munge.started-here" ]; then
    kill_pidfile /run/munge/munged.pid
    rm -f "$VC_STATE/munge.started-here"
  fi
  # Node-local scratch goes too: a new cluster starts with empty /tmp folders.
  rm -rf "$VC_STATE/ctld-state" "$VC_STATE"/spool-vc-n* "$VC_STATE"/tmp-vc-n*
  return 0
}

# tbf shapes egress only, so each direction is shaped on the end that sends it. netem (delay,
# loss) is not in every kernel; a rate limit is what a bad cable or a mis-negotiated port gives.
shape() {
  local node=$1 rate=$2 end=$3
  local tbf=(root tbf rate "$rate" burst 32kb latency 400ms)
  case $end in
    receive) tc qdisc replace dev "$node" "${tbf[@]}" ;;
    send) nsenter --net="/var/run/netns/$node" tc qdisc replace dev eth0 "${tbf[@]}" ;;
  esac
}

degrade() {
  local node=${1:-} rate=${2:-} which=${3:-both}
  if [ -z "$node" ] || [ -z "$rate" ] || ! ip netns list | grep -qw "^$node"; then
    say "degrade NODE RATE [both|send|receive]: NODE must be a running node (vc-nK), got '$node'"
    return 2
  fi
  case $which in
    both) shape "$node" "$rate" send && shape "$node" "$rate" receive ;;
    send | receive) shape "$node" "$rate" "$which" ;;
    *) say "degrade: direction must be both, send or receive, got '$which'"; return 2 ;;
  esac || { say "tc could not shape $node (is sch_tbf available?)"; return 1; }
  say "$node throttled to $rate ($which)"
}

restore() {
  local node=${1:-}
  [ -n "$node" ] || { say "restore NODE"; return 2; }
  tc qdisc del dev "$node" root 2>/dev/null
  nsenter --net="/var/run/netns/$node" tc qdisc del dev eth0 root 2>/dev/null
  return 0
}

case ${1:-} in
  start) start "${2:-2}" ;;
  degrade) degrade "${2:-}" "${3:-}" "${4:-both}" ;;
  restore) restore "${2:-}" ;;
  stop) stop ;;
  status) sinfo -N ;;
  check) check ;;
  *)
    sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac

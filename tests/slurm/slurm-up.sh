#!/usr/bin/env bash
# Starts a one-host Slurm (slurmctld + slurmd, auth/none, pgid proctrack) for
# the srun tests. Usage: slurm-up.sh DIR PORT_BASE. Exits 77 (skip) when Slurm
# is not installed. The config is DIR/slurm.conf; stop with slurm-down.sh DIR.
set -u
dir=$1; port=$2
command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v srun >/dev/null || {
  echo "slurm-up: slurmctld/slurmd/srun not installed (apt-get install slurmctld slurmd slurm-client): skipping"; exit 77; }
"$(dirname "$0")/slurm-down.sh" "$dir" >/dev/null 2>&1
rm -rf "$dir"; mkdir -p "$dir"/{state,spool,log,tmp}
host=$(hostname -s); cpus=$(nproc)
mem=$(awk '/MemTotal/ {print int($2/1024*0.8)}' /proc/meminfo)
cat > "$dir/slurm.conf" <<CONF
ClusterName=hsrtest
SlurmctldHost=$host
AuthType=auth/none
CredType=cred/none
MpiDefault=none
ProctrackType=proctrack/pgid
TaskPlugin=task/none
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$port
SlurmdPort=$((port + 1))
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
FirstJobId=$((port * 1000))
AccountingStorageType=accounting_storage/none
NodeName=$host CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:8
CONF
# The PMIx plugin's per-step folder (spmix_appdir_UID_JOB.STEP) is under /tmp
# by default and named by job id only, and every tree's Slurm on this host
# starts at job 1: two steps of one id at once and the second's launch fails
# ("task launch failed: Unspecified error"; srun still exits 0). A first job
# id of this port's and a folder of this Slurm's own keep them apart.
echo "PMIxCliTmpDirBase=$dir/tmp" > "$dir/mpi.conf"
export SLURM_CONF="$dir/slurm.conf"
setsid slurmctld -D -i -f "$SLURM_CONF" > "$dir/log/ctld.out" 2>&1 < /dev/null &
echo $! > "$dir/ctld.pid"
setsid slurmd -D -f "$SLURM_CONF" > "$dir/log/d.out" 2>&1 < /dev/null &
echo $! > "$dir/d.pid"
for _ in $(seq 1 60); do
  state=$(sinfo -h -o %T 2>/dev/null | head -1)
  case "$state" in idle*|mix*|alloc*) echo "slurm-up: $host ready ($state) on port $port"; exit 0 ;; esac
  sleep 0.5
done
echo "slurm-up: Slurm did not become ready within 30 s; logs:"; tail -n 20 "$dir"/log/*.log "$dir"/log/*.out
exit 1

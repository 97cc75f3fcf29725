#!/usr/bin/env bash
# A throwaway one-node Slurm cluster on localhost, for tests/test_slurm.py.
#
#   tests/slurm/cluster.sh start DIR   writes DIR/slurm.conf for this host, starts munged,
#                                      slurmctld and slurmd (all state, sockets and logs under
#                                      DIR), waits until sinfo shows the node idle, and prints
#                                      SLURM_CONF=DIR/slurm.conf
#   tests/slurm/cluster.sh stop DIR    stops the three daemons by their pid files
#
# Needs Debian's slurm-wlm and munge, and root (slurmd runs jobs as their submitter).
# Accounting is off (no slurmdbd): job states come from squeue while jobs are known to the
# controller, and from what the jobs write into the store after that.
set -euo pipefail

cmd=${1:?usage: cluster.sh start|stop DIR}
dir=${2:?usage: cluster.sh start|stop DIR}

stop() {
    for name in slurmd slurmctld munged; do
        if [[ -f "$dir/$name.pid" ]]; then
            pid=$(cat "$dir/$name.pid")
            kill "$pid" 2>/dev/null || true
            for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
            kill -9 "$pid" 2>/dev/null || true
            rm -f "$dir/$name.pid"
        fi
    done
}

if [[ $cmd == stop ]]; then
    stop
    exit 0
fi
[[ $cmd == start ]] || { echo "usage: cluster.sh start|stop DIR" >&2; exit 2; }

for tool in munged slurmctld slurmd sinfo; do
    command -v "$tool" >/dev/null || { echo "$tool not installed (apt-get install slurm-wlm munge)" >&2; exit 3; }
done
[[ $(id -u) == 0 ]] || { echo "starting slurmd needs root" >&2; exit 3; }

mkdir -p "$dir"/{spool,state,munge}
chmod 755 "$dir"
host=$(hostname -s)
cpus=$(nproc)
mem_mb=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 512 ))
port=$(( 20000 + RANDOM % 20000 ))

# munge: a key of our own and a socket of our own, so a system munged is left alone.
dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
chown -R munge:munge "$dir/munge"
chmod 711 "$dir/munge"
chmod 400 "$dir/munge/munge.key"
runuser -u munge -- munged --socket="$dir/munge/munge.sock" --key-file="$dir/munge/munge.key" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/munge/munged.log" \
    --seed-file="$dir/munge/munged.seed" --num-threads=2
for _ in $(seq 50); do [[ -s $dir/munge/munged.pid ]] && break; sleep 0.1; done
cp "$dir/munge/munged.pid" "$dir/munged.pid"

cat > "$dir/slurm.conf" <<CONF
ClusterName=accelbench-test
SlurmctldHost=$host
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$port
SlurmdPort=$((port + 1))
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
PluginDir=/usr/lib/x86_64-linux-gnu/slurm-wlm
NodeName=$host CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
plugin=$( (find /usr/lib /usr/lib64 -maxdepth 4 -name auth_munge.so -path '*slurm*' 2>/dev/null || true) | head -n1)
[[ -n $plugin ]] || { echo "Slurm's auth_munge.so not found under /usr/lib" >&2; exit 3; }
plugdir=$(dirname "$plugin")
sed -i "s|^PluginDir=.*|PluginDir=$plugdir|" "$dir/slurm.conf"

export SLURM_CONF=$dir/slurm.conf
slurmctld -i
slurmd
for _ in $(seq 150); do
    state=$(sinfo -h -N -o %t 2>/dev/null | head -n1 || true)
    if [[ $state == idle ]]; then
        echo "SLURM_CONF=$SLURM_CONF"
        exit 0
    fi
    sleep 0.2
done
echo "node not idle after 30 s (state: ${state:-none}); see $dir/slurmctld.log and $dir/slurmd.log" >&2
stop
exit 4

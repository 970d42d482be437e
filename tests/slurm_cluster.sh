#!/bin/sh
# A throw-away Slurm cluster for the tests: two compute nodes (st1, st2,
# 4 CPUs and 4 counted GPUs each) served by real munged, slurmctld and two
# slurmd daemons on this machine, all living in one private directory under
# the build tree (keys, sockets, state, spool, logs) on ports nobody else
# is likely to use.  Sourced by tests (slurm_cluster_start / _stop, the
# latter belongs in an EXIT trap) or run as `slurm_cluster.sh start|stop
# DIR`.  Missing packages (slurm-wlm, munge) are installed by running
# install-deps.sh; a cluster that cannot start is the caller's failure,
# never a skip.
#
# Why the odd settings (Debian 12, slurm-wlm 22.05, Open MPI 4.1.4):
# - two slurmd on one machine run as `slurmd -N NAME`, each NodeName with
#   its own Port and %n in its spool, pid and log paths;
# - each slurmd lives in its own mount namespace with a private /tmp,
#   because the PMIx plugin's per-step directory in /tmp would collide;
#   the namespace also tells us exactly which processes (slurmstepd and the
#   tasks) belong to a node when stopping it;
# - SlurmdParameters=config_overrides lets a node claim more CPUs than the
#   machine has; proctrack/linuxproc and task/none keep cgroups out;
# - the GPUs are counts without device files, so the job scripts' GPU
#   requests are scheduled exactly as on a GPU cluster;
# - Open MPI's shared-memory transport mis-pairs ranks across the two
#   "nodes" of one machine, so jobs get OMPI_MCA_btl=tcp,self;
# - a requeued job may start again only when its credential expired
#   (cred_expire, 120 s by default), and is then started by the periodic
#   scheduler pass (sched_interval, 60 s): 10 s and 1 s keep tests short.

# slurm_cluster_start DIR: starts everything, waits until both nodes are
# idle, exports SLURM_CONF; returns non-zero with the daemons' log tails on
# stderr when anything does not come up.
slurm_cluster_start() {
    sc_dir=$1
    if [ "$(id -u)" -ne 0 ]; then
        echo "slurm_cluster: slurmd must run as root; run the tests as root" >&2
        return 1
    fi
    # Missing daemons come from Debian's packages, through install-deps.sh
    # (idempotent; the project's one list of packages).
    sc_bins="munged mungekey slurmctld slurmd sinfo sbatch unshare mount python3"
    if ! sc_have $sc_bins; then
        sc_deps=${top_srcdir:-$(dirname "$0")/..}/install-deps.sh
        echo "slurm_cluster: installing slurm-wlm and munge with $sc_deps" >&2
        "$sc_deps" >&2 || return 1
        sc_have $sc_bins || return 1
    fi
    rm -rf "$sc_dir"
    mkdir -p "$sc_dir" || return 1
    sc_dir=$(cd "$sc_dir" && pwd)
    # A unix socket path is limited to 108 bytes.
    if [ ${#sc_dir} -gt 80 ]; then
        echo "slurm_cluster: $sc_dir is too long for a socket path" >&2
        return 1
    fi
    chmod 700 "$sc_dir"
    mkdir -p "$sc_dir/munge" "$sc_dir/ctld" "$sc_dir/log" "$sc_dir/etc" \
             "$sc_dir/node/st1/spool" "$sc_dir/node/st1/tmp" \
             "$sc_dir/node/st2/spool" "$sc_dir/node/st2/tmp"
    chmod 700 "$sc_dir/munge"
    chmod 1777 "$sc_dir/node/st1/tmp" "$sc_dir/node/st2/tmp"
    : >"$sc_dir/pids"

    # Twelve consecutive free ports somewhere in 26000-31999: controller,
    # two slurmd, and srun's listening range.
    sc_port=$(python3 - <<'EOF'
import random, socket
rng = random.Random()
for _ in range(200):
    base = rng.randrange(26000, 32000 - 12)
    try:
        socks = []
        for p in range(base, base + 12):
            s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", p)); socks.append(s)
        for s in socks: s.close()
        print(base); break
    except OSError:
        for s in socks: s.close()
EOF
) || return 1
    [ -n "$sc_port" ] || { echo "slurm_cluster: no free ports" >&2; return 1; }

    mungekey --create --keyfile="$sc_dir/munge/munge.key" >/dev/null 2>&1 ||
        dd if=/dev/urandom of="$sc_dir/munge/munge.key" bs=1024 count=1 2>/dev/null
    chmod 600 "$sc_dir/munge/munge.key"
    munged -F --force --socket="$sc_dir/munge/socket" \
        --key-file="$sc_dir/munge/munge.key" --pid-file="$sc_dir/munge/munged.pid" \
        --log-file="$sc_dir/log/munged.log" --seed-file="$sc_dir/munge/seed" \
        </dev/null >>"$sc_dir/log/munged.out" 2>&1 &
    echo "munged $!" >>"$sc_dir/pids"

    sc_host=$(hostname -s)
    cat >"$sc_dir/etc/slurm.conf" <<EOF
# Written by tests/slurm_cluster.sh for one test run.
ClusterName=shardtrain-check
SlurmctldHost=$sc_host(127.0.0.1)
SlurmctldPort=$sc_port
SrunPortRange=$((sc_port + 3))-$((sc_port + 11))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$sc_dir/munge/socket,cred_expire=10
StateSaveLocation=$sc_dir/ctld
SlurmctldPidFile=$sc_dir/ctld/slurmctld.pid
SlurmctldLogFile=$sc_dir/log/slurmctld.log
SlurmdSpoolDir=$sc_dir/node/%n/spool
SlurmdPidFile=$sc_dir/node/%n/slurmd.pid
SlurmdLogFile=$sc_dir/log/slurmd-%n.log
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SchedulerType=sched/builtin
SchedulerParameters=sched_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
GresTypes=gpu
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
ReturnToService=2
SlurmctldDebug=info
SlurmdDebug=info
KillWait=5
InactiveLimit=0
MinJobAge=300
JobRequeue=1
NodeName=st1 NodeAddr=127.0.0.1 Port=$((sc_port + 1)) CPUs=4 Gres=gpu:4 State=UNKNOWN
NodeName=st2 NodeAddr=127.0.0.1 Port=$((sc_port + 2)) CPUs=4 Gres=gpu:4 State=UNKNOWN
PartitionName=check Nodes=st1,st2 Default=YES MaxTime=INFINITE State=UP
EOF
    # Slurm drops a GPU without a device file and wants a real device: each
    # "GPU" is a copy of /dev/null's node (a plain file where mknod fails).
    mkdir -p "$sc_dir/dev"
    for g in 0 1 2 3; do
        mknod "$sc_dir/dev/gpu$g" c 1 3 2>/dev/null || : >"$sc_dir/dev/gpu$g"
    done
    printf 'AutoDetect=off\nNodeName=st[1-2] Name=gpu File=%s/dev/gpu[0-3]\n' \
        "$sc_dir" >"$sc_dir/etc/gres.conf"
    SLURM_CONF=$sc_dir/etc/slurm.conf
    OMPI_MCA_btl=tcp,self
    export SLURM_CONF OMPI_MCA_btl

    # munged must answer before slurmctld asks it for credentials.
    sc_i=0
    until [ -S "$sc_dir/munge/socket" ]; do
        sc_i=$((sc_i + 1))
        [ $sc_i -gt 100 ] && { sc_fail "munged did not create its socket"; return 1; }
        sleep 0.1
    done

    slurmctld -D -c -f "$SLURM_CONF" </dev/null >>"$sc_dir/log/slurmctld.out" 2>&1 &
    echo "slurmctld $!" >>"$sc_dir/pids"
    # Each slurmd sees its own /tmp.  What the jobs need and what lives
    # under /tmp (this cluster, the source and build trees, the binary, when
    # the checkout itself is under /tmp) is bound back into it at the same
    # path, so only the rest of /tmp (where the PMIx plugin makes its
    # per-step directories) is private.
    sc_keep=
    for sc_d in "$sc_dir" "${top_srcdir:-}" "${top_builddir:-}" "$(dirname "${SHARDTRAIN:-/}")"; do
        [ -n "$sc_d" ] && sc_d=$(cd "$sc_d" 2>/dev/null && pwd -P) || continue
        case "$sc_d" in
        /tmp/?*) sc_d=/tmp/$(printf '%s\n' "${sc_d#/tmp/}" | cut -d/ -f1) ;;
        *) continue ;;
        esac
        case " $sc_keep " in *" $sc_d "*) ;; *) sc_keep="$sc_keep $sc_d" ;; esac
    done
    for n in st1 st2; do
        unshare -m sh -c '
            priv=$1 node=$2 conf=$3
            shift 3
            for d; do
                mkdir -p "$priv${d#/tmp}" && mount --bind "$d" "$priv${d#/tmp}" || exit 1
            done
            mount --rbind "$priv" /tmp && exec slurmd -D -N "$node" -f "$conf"' \
            sh "$sc_dir/node/$n/tmp" "$n" "$SLURM_CONF" $sc_keep \
            </dev/null >>"$sc_dir/log/slurmd-$n.out" 2>&1 &
        echo "slurmd $! $n" >>"$sc_dir/pids"
    done

    # Idle within a minute, or the logs say why not.
    sc_i=0
    while :; do
        sc_states=$(sinfo -h -N -o '%N=%t' 2>/dev/null | sort -u | tr '\n' ' ')
        [ "$sc_states" = "st1=idle st2=idle " ] && return 0
        case "$sc_states" in
        *inval*|*drain*) sc_fail "a node was refused (sinfo: $sc_states)"; return 1 ;;
        esac
        sc_i=$((sc_i + 1))
        if [ $sc_i -gt 120 ]; then
            sc_fail "nodes not idle after 60 s (sinfo: ${sc_states:-no answer})"
            return 1
        fi
        sleep 0.5
    done
}

# sc_have PROGRAM...: all on PATH, else names the missing ones.
sc_have() {
    sc_missing=
    for b in "$@"; do
        command -v "$b" >/dev/null 2>&1 || sc_missing="$sc_missing $b"
    done
    [ -z "$sc_missing" ] && return 0
    echo "slurm_cluster: not found:$sc_missing" >&2
    return 1
}

# The daemons' last words, for a start-up that failed.
sc_fail() {
    echo "slurm_cluster: $1" >&2
    for f in "$sc_dir"/log/*; do
        [ -s "$f" ] && { echo "== $f" >&2; tail -n 15 "$f" >&2; }
    done
    return 0
}

# Pids of every process in the mount namespace of process $1 other than
# itself: a node's slurmstepd and its tasks.
# sc_is NAME PID: PID is still the daemon we started (not a reused PID)
sc_is() { [ "$(cat "/proc/$2/comm" 2>/dev/null)" = "$1" ]; }

sc_namespace_members() {
    # Only a live slurmd in a namespace of its own: if it died and its PID
    # was reused, or unshare did not take, the "namespace" would be the
    # machine's and this would kill every process on it.
    sc_is slurmd "$1" || return 0
    sc_ns=$(readlink "/proc/$1/ns/mnt" 2>/dev/null) || return 0
    [ "$sc_ns" != "$(readlink /proc/$$/ns/mnt 2>/dev/null)" ] || return 0
    for p in /proc/[0-9]*; do
        p=${p#/proc/}
        [ "$p" = "$1" ] && continue
        [ "$(readlink "/proc/$p/ns/mnt" 2>/dev/null)" = "$sc_ns" ] && echo "$p"
    done
    return 0
}

# sc_kill PID...: TERM, up to 10 s of grace, then KILL.
sc_kill() {
    [ $# -gt 0 ] || return 0
    kill "$@" 2>/dev/null
    sc_i=0
    while [ $sc_i -lt 50 ]; do
        sc_alive=
        for p in "$@"; do kill -0 "$p" 2>/dev/null && sc_alive="$sc_alive $p"; done
        [ -z "$sc_alive" ] && return 0
        sleep 0.2
        sc_i=$((sc_i + 1))
    done
    # shellcheck disable=SC2086
    kill -9 $sc_alive 2>/dev/null
    return 0
}

# slurm_cluster_pids [DIR]: every process the cluster owns now (daemons,
# slurmstepd, tasks), for checking that a stop leaves nothing behind.
slurm_cluster_pids() {
    sc_dir=${1:-${sc_dir:-}}
    [ -f "$sc_dir/pids" ] || return 0
    while read -r sc_what sc_pid sc_node; do
        kill -0 "$sc_pid" 2>/dev/null || continue
        echo "$sc_pid"
        [ "$sc_what" = slurmd ] && sc_namespace_members "$sc_pid"
    done <"$sc_dir/pids"
    return 0
}

# slurm_cluster_stop [DIR]: cancels what still runs, then stops every daemon
# this harness started (by the pids it recorded) and everything left in the
# nodes' namespaces.  Safe to call twice or after a failed start.
slurm_cluster_stop() {
    sc_dir=${1:-${sc_dir:-}}
    [ -n "$sc_dir" ] && [ -f "$sc_dir/pids" ] || return 0
    if [ -f "$sc_dir/etc/slurm.conf" ]; then
        SLURM_CONF=$sc_dir/etc/slurm.conf timeout 10 scancel --quiet --full \
            --partition=check >/dev/null 2>&1
    fi
    while read -r sc_what sc_pid sc_node; do
        [ "$sc_what" = slurmd ] || continue
        # shellcheck disable=SC2046
        sc_kill $(sc_namespace_members "$sc_pid")
        sc_is slurmd "$sc_pid" && sc_kill "$sc_pid"
    done <"$sc_dir/pids"
    while read -r sc_what sc_pid sc_node; do
        [ "$sc_what" = slurmctld ] && sc_is slurmctld "$sc_pid" && sc_kill "$sc_pid"
    done <"$sc_dir/pids"
    while read -r sc_what sc_pid sc_node; do
        [ "$sc_what" = munged ] && sc_is munged "$sc_pid" && sc_kill "$sc_pid"
    done <"$sc_dir/pids"
    rm -f "$sc_dir/pids"
    return 0
}

# ---- for the test scripts ---------------------------------------------------
# slurm_test_begin NAME: what every Slurm test does first.  Forgets any
# launcher identity inherited from an enclosing job (it would be read as
# ours), starts a cluster in tests/tmp/NAME.PID with an EXIT trap that
# stops it, and prepares the token data.  Sets CLUSTER and W (the work
# directory: the nodes see a private /tmp, so everything a job reads or
# writes lives under the build tree).  sbatch's default --export=ALL hands
# the jobs SHARDTRAIN, the thread count, SLURM_CONF and OMPI_MCA_btl.
slurm_test_begin() {
    for v in $(env | sed -n 's/^\(SLURM_[A-Za-z0-9_]*\|OMPI_COMM_WORLD_[A-Z_]*\|PMIX_[A-Za-z0-9_]*\)=.*/\1/p'); do
        unset "$v"
    done
    export OMP_NUM_THREADS=1 SHARDTRAIN
    CLUSTER=${top_builddir:-.}/tests/tmp/$1.$$
    trap 'slurm_cluster_stop "$CLUSTER"; [ "$tap_fail" -eq 0 ] && rm -rf "$CLUSTER"; rm -rf "$TMP"; echo "1..$tap_n"' EXIT
    trap 'exit 1' INT TERM HUP   # so that the EXIT trap stops the daemons
    if slurm_cluster_start "$CLUSTER"; then
        ok "Slurm cluster starts: nodes st1 and st2 idle"
    else
        not_ok "Slurm cluster starts: nodes st1 and st2 idle"
        exit 1
    fi
    CLUSTER=$sc_dir
    W=$CLUSTER/work
    mkdir -p "$W"
    prepare_test_data "$W"
}

# slurm_test_cfg NAME STEPS [SECTION.KEY=VALUE...]: the base configuration
# of tests/lib.sh on the CPU, whose logs and weights go to $W/NAME.  All in
# the file: the job scripts take a config path alone.
slurm_test_cfg() {
    _name=$1 _steps=$2
    shift 2
    write_base_ini "$W/$_name.ini" data.train="$W/data/sh_train_*.bin" train.device=cpu \
        train.micro_batch=2 train.steps="$_steps" train.seed=11 log.dir="$W/$_name/logs" \
        checkpoint.dir="$W/$_name/ckpt" "$@"
}

case "${0##*/}" in
slurm_cluster.sh)
    case "${1:-}" in
    start) slurm_cluster_start "${2:?usage: slurm_cluster.sh start DIR}" ;;
    stop) slurm_cluster_stop "${2:?usage: slurm_cluster.sh stop DIR}" ;;
    *) echo "usage: slurm_cluster.sh start|stop DIR" >&2; exit 2 ;;
    esac
    ;;
esac

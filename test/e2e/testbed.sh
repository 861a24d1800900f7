#!/usr/bin/env bash
# gpuhc test bed: real Slurm on one machine (test/e2e/README.md).
#
#   A  Slurm 22.05 from the Debian 12 host packages: slurmctld + one slurmd
#      (NodeName = short hostname) + read-only slurmrestd (openapi/v0.0.38).
#      Config lives in a scratch dir and is passed with -f / SLURM_CONF, so
#      the host's /etc/slurm is never touched.
#   B  Slurm 24.11 in a debootstrapped Debian 13 (trixie) chroot, cached in
#      /var/cache/gpuhc-testbed/trixie: slurmctld, four simulated nodes
#      gpu[001-004] (one slurmd -N each), slurmrestd with rest_auth/jwt.
#   C  Slurm 26.05 the same way in a Debian forky chroot (debootstrapped with
#      sid's script), /var/cache/gpuhc-testbed/forky, on its own ports.
#
# Usage: testbed.sh up|down|status|env|logs          # all three beds
#        testbed.sh up22|up24|up26|down22|down24|down26|token22|token24|token26
#        testbed.sh stop-restd24|restart-restd24|stop-restd26|restart-restd26
#        testbed.sh prepare      # install host packages / create both chroots only
#
# Hooks (set before up22/up24/up26): GPUHC_S22_EXTRA / GPUHC_S24_EXTRA /
# GPUHC_S26_EXTRA hold extra slurm.conf lines (e.g. HealthCheckProgram=...).
# `testbed.sh reconfig22 FILE` / `reconfig24 FILE` / `reconfig26 FILE` replace
# the extra lines later and run scontrol reconfigure.
#
# Every daemon is started in the foreground (-D/-F) in the background of this
# script; its PID is recorded under $GPUHC_E2E_DIR/pids and `down` kills exactly
# those PIDs (plus leftovers proven ours: chroot'ed into our root, or started
# with our config file).
set -euo pipefail

E2E_DIR=${GPUHC_E2E_DIR:-/tmp/gpuhc-e2e}
CACHE=${GPUHC_TESTBED_CACHE:-/var/cache/gpuhc-testbed}
MIRROR=${GPUHC_TESTBED_MIRROR:-http://deb.debian.org/debian}
PIDS=$E2E_DIR/pids
HOST=$(hostname -s)
E2E_SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)  # test/e2e

# --- A: Slurm 22.05 on the host ---
S22=$E2E_DIR/s22
S22_CONF=$S22/slurm.conf
S22_CTLD_PORT=${GPUHC_S22_CTLD_PORT:-16817}
S22_SLURMD_PORT=${GPUHC_S22_SLURMD_PORT:-16818}
S22_REST_PORT=${GPUHC_S22_REST_PORT:-16820}
S22_NODE=$HOST
S22_TOKEN=$S22/token            # root-only 0600, raw JWT for user slurm

# --- B: Slurm 24.11 and C: Slurm 26.05, each in its own chroot ---
# Both chroot beds run the same code (the *_bed functions below, given the
# version 24 or 26); these variables are their interface to the scenarios.
ROOT24=${GPUHC_TESTBED_ROOT:-$CACHE/trixie}
SUITE24=${GPUHC_TESTBED_SUITE:-trixie}
S24_IN=/srv/gpuhc-e2e           # path inside the chroot
S24=$ROOT24$S24_IN              # same, seen from the host
S24_CTLD_PORT=${GPUHC_S24_CTLD_PORT:-17817}
S24_SLURMD_PORT=${GPUHC_S24_SLURMD_PORT:-17821}   # gpu001..gpu004 = +0..+3
S24_REST_PORT=${GPUHC_S24_REST_PORT:-17830}
S24_NODES=(gpu001 gpu002 gpu003 gpu004)
S24_TOKEN_IN=/etc/gpuhc/slurmrestd.token          # inside the chroot, 0600 root
S24_TOKEN=$ROOT24$S24_TOKEN_IN

# Debian forky carries Slurm 26.05.5. bookworm's debootstrap has no forky
# script; sid's bootstraps it (verified: bookworm debootstrap 1.0.128).
ROOT26=${GPUHC_TESTBED_ROOT26:-$CACHE/forky}
SUITE26=${GPUHC_TESTBED_SUITE26:-forky}
S26_IN=/srv/gpuhc-e2e
S26=$ROOT26$S26_IN
S26_CTLD_PORT=${GPUHC_S26_CTLD_PORT:-18817}
S26_SLURMD_PORT=${GPUHC_S26_SLURMD_PORT:-18821}   # gpu001..gpu004 = +0..+3
S26_REST_PORT=${GPUHC_S26_REST_PORT:-18830}
S26_NODES=(gpu001 gpu002 gpu003 gpu004)
S26_TOKEN_IN=/etc/gpuhc/slurmrestd.token
S26_TOKEN=$ROOT26$S26_TOKEN_IN

REST_USER=gpuhcrest             # slurmrestd refuses root and SlurmUser

HOST_PKGS=(munge slurmctld slurmd slurmrestd slurm-client slurm-wlm-jwt-plugin
           libslurm-dev debootstrap jq curl util-linux iproute2 procps)
CHROOT_PKGS=slurmctld,slurmd,slurmrestd,slurm-client,slurm-wlm-jwt-plugin,munge,curl

# common_conf prints the slurm.conf lines both test beds share: no cgroups,
# no accounting, nodes back in service on their own.
common_conf() {
	cat <<'CONF'
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SchedulerType=sched/backfill
ReturnToService=2
MpiDefault=none
SlurmdTimeout=30
SlurmctldTimeout=30
CONF
}

log() { printf '[testbed %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# wait_for TIMEOUT_S DESCRIPTION CMD... : poll CMD every 0.5 s.
wait_for() {
	local t=$1 what=$2; shift 2
	local end=$((SECONDS + t))
	until "$@" >/dev/null 2>&1; do
		if ((SECONDS >= end)); then
			log "timed out after ${t}s waiting for: $what"
			return 1
		fi
		sleep 0.5
	done
}

# ---------------------------------------------------------------- processes

# start NAME LOGFILE CMD... : run CMD in the background (it must stay in the
# foreground itself), record its PID as $PIDS/NAME.pid.
start() {
	local name=$1 out=$2; shift 2
	mkdir -p "$PIDS"
	setsid "$@" </dev/null >>"$out" 2>&1 9>&- &
	local pid=$!
	echo "$pid" >"$PIDS/$name.pid"
	log "started $name (pid $pid): $*"
}

# alive PID: running and not a zombie.
# http_up URL: slurmrestd answers at all (22.05 wants auth even for /openapi/v3).
http_up() {
	local code
	code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$1" 2>/dev/null) || true
	[[ -n $code && $code != 000 ]]
}

alive() {
	[[ -n ${1:-} ]] && kill -0 "$1" 2>/dev/null || return 1
	local st
	st=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
	[[ $st != Z ]]
}

pid_of() { [[ -f $PIDS/$1.pid ]] && cat "$PIDS/$1.pid"; }

# stop_pid PID NAME: TERM, wait up to 10 s, then KILL.
stop_pid() {
	local pid=$1 name=$2 i
	alive "$pid" || return 0
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < 40; i++)); do
		alive "$pid" || { log "stopped $name (pid $pid)"; return 0; }
		# reap if it is our child; harmless otherwise
		sleep 0.25
	done
	log "$name (pid $pid) ignored SIGTERM; SIGKILL"
	kill -KILL "$pid" 2>/dev/null || true
	sleep 0.2
}

# stop NAME: stop the recorded PID, if it is still the process we started.
stop() {
	local name=$1 pid
	pid=$(pid_of "$name" 2>/dev/null) || return 0
	if alive "$pid"; then
		stop_pid "$pid" "$name"
	fi
	rm -f "$PIDS/$name.pid"
}

# stop_prefix PREFIX: stop every recorded daemon whose name starts with PREFIX.
stop_prefix() {
	local f n
	shopt -s nullglob
	for f in "$PIDS"/"$1"*.pid; do
		n=$(basename "$f" .pid)
		stop "$n"
	done
	shopt -u nullglob
}

# Leftovers of a run whose pid files were lost: processes chroot'ed into our
# root (B, C: kill_strays 24|26), or host slurm daemons started with our
# config file (A: kill_strays 22).
kill_strays() {
	local which=$1 p root cmd envs want=
	[[ $which == 22 ]] || { bed "$which"; want=$B_ROOT; }
	for p in /proc/[0-9]*; do
		p=${p#/proc/}
		[[ $p == "$$" ]] && continue
		if [[ -n $want ]]; then
			root=$(readlink "/proc/$p/root" 2>/dev/null) || continue
			[[ $root == "$want" ]] || continue
		else
			cmd=$({ tr '\0' ' ' <"/proc/$p/cmdline"; } 2>/dev/null) || continue
			[[ $cmd == *slurm* ]] || continue
			envs=$({ tr '\0' '\n' <"/proc/$p/environ"; } 2>/dev/null) || true
			[[ $cmd == *"$S22_CONF"* || $envs == *"SLURM_CONF=$S22_CONF"* ]] || continue
		fi
		alive "$p" || continue
		cmd=$({ tr '\0' ' ' <"/proc/$p/cmdline"; } 2>/dev/null) || true
		log "killing leftover pid $p: $cmd"
		stop_pid "$p" "leftover"
	done
}

# ---------------------------------------------------------------- prepare

need_host_pkgs() {
	local missing=() p
	for p in "${HOST_PKGS[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	((${#missing[@]} == 0)) && return 0
	log "installing host packages: ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# bed 24|26: point the B_* variables at that chroot test bed (B or C). Every
# *_bed function takes the version first and calls this; the beds differ
# only in what is set here.
bed() {
	case $1 in
	24) B_LETTER=B B_LABEL=24.11 B_SUITE=$SUITE24 B_SCRIPT= B_DLOG=$CACHE/debootstrap.log ;;
	26) B_LETTER=C B_LABEL=26.05 B_SUITE=$SUITE26 B_SCRIPT=/usr/share/debootstrap/scripts/sid
	    B_DLOG=$CACHE/debootstrap-forky.log ;;
	*) die "no chroot test bed '$1' (want 24 or 26)" ;;
	esac
	local v=$1 n
	B_V=$v
	n=ROOT$v; B_ROOT=${!n}
	n=S$v; B_DIR=${!n}
	n=S${v}_IN; B_IN=${!n}
	n=S${v}_CTLD_PORT; B_CTLD_PORT=${!n}
	n=S${v}_SLURMD_PORT; B_SLURMD_PORT=${!n}
	n=S${v}_REST_PORT; B_REST_PORT=${!n}
	n=S${v}_TOKEN; B_TOKEN=${!n}
	n=S${v}_TOKEN_IN; B_TOKEN_IN=${!n}
	n=S${v}_NODES[@]; B_NODES=("${!n}")
	n=GPUHC_S${v}_EXTRA; B_EXTRA=${!n:-}
}

# chroot_ok [V]: the chroot has the Slurm binaries (marker once checked).
chroot_ok() {
	bed "${1:-24}"
	[[ -f $B_ROOT/.gpuhc-testbed-ok ]] && return 0
	local f
	for f in usr/sbin/slurmctld usr/sbin/slurmd usr/sbin/slurmrestd usr/bin/scontrol \
		usr/sbin/munged usr/bin/curl usr/lib/x86_64-linux-gnu/slurm-wlm/auth_jwt.so; do
		[[ -e $B_ROOT/$f ]] || return 1
	done
	date -u +%FT%TZ >"$B_ROOT/.gpuhc-testbed-ok"
}

# need_chroot [V]: create (debootstrap) the chroot of bed V (default 24) once;
# it is cached and reused.
need_chroot() {
	local v=${1:-24}
	chroot_ok "$v" && return 0
	umount_chroot "$v"
	bed "$v"
	if [[ -e $B_ROOT ]]; then
		log "chroot $B_ROOT is incomplete; recreating"
		# never rm -rf across a live mount
		if grep -q " $B_ROOT/" /proc/mounts; then die "mounts left under $B_ROOT; refusing to remove it"; fi
		rm -rf --one-file-system "$B_ROOT"
	fi
	mkdir -p "$(dirname "$B_ROOT")"
	log "debootstrap $B_SUITE into $B_ROOT (a few minutes)"
	# B_SCRIPT, where set, is the debootstrap script for a suite the
	# host's debootstrap does not know (forky: sid's).
	debootstrap --variant=minbase --include="$CHROOT_PKGS" "$B_SUITE" "$B_ROOT" "$MIRROR" ${B_SCRIPT:+"$B_SCRIPT"} \
		>"$B_DLOG" 2>&1 || { tail -30 "$B_DLOG" >&2; die "debootstrap $B_SUITE failed"; }
	chroot_ok "$v" || die "chroot $B_ROOT lacks slurm binaries after debootstrap"
}

ensure_user() { # ensure_user [chroot-root]: create $REST_USER
	local r=${1:-}
	if [[ -n $r ]]; then
		chroot "$r" getent passwd "$REST_USER" >/dev/null ||
			chroot "$r" /usr/sbin/useradd --system --no-create-home --shell /usr/sbin/nologin "$REST_USER"
	else
		getent passwd "$REST_USER" >/dev/null ||
			useradd --system --no-create-home --shell /usr/sbin/nologin "$REST_USER"
	fi
}

# ---------------------------------------------------------------- munge

munge_ok_host() { munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }
munge_ok_bed() { bed "$1"; chroot "$B_ROOT" sh -c 'munge -n | unmunge' >/dev/null 2>&1; }

start_munge_host() {
	if munge_ok_host; then log "host munge already works; reusing it"; return 0; fi
	[[ -s /etc/munge/munge.key ]] || /usr/sbin/mungekey --create --force
	mkdir -p /run/munge /var/lib/munge /var/log/munge
	chown -R munge: /etc/munge /run/munge /var/lib/munge /var/log/munge
	chmod 0700 /etc/munge; chmod 0600 /etc/munge/munge.key; chmod 0755 /run/munge
	rm -f /run/munge/munged.pid /run/munge/munge.socket.2.lock
	mkdir -p "$S22"
	start munge22 "$E2E_DIR/munged22.out" setpriv --reuid=munge --regid=munge --clear-groups \
		/usr/sbin/munged -F
	wait_for 15 "host munged" munge_ok_host || { cat "$E2E_DIR/munged22.out" >&2; die "host munge does not work"; }
}

# start_munge_bed V: munged inside that chroot (each chroot has its own key
# and socket).
start_munge_bed() {
	local v=$1
	if munge_ok_bed "$v"; then log "chroot munge ($B_ROOT) already works; reusing it"; return 0; fi
	local r=$B_ROOT
	[[ -s $r/etc/munge/munge.key ]] || chroot "$r" /usr/sbin/mungekey --create --force
	mkdir -p "$r/run/munge" "$r/var/lib/munge" "$r/var/log/munge"
	chroot "$r" chown -R munge: /etc/munge /run/munge /var/lib/munge /var/log/munge
	chmod 0700 "$r/etc/munge"; chmod 0600 "$r/etc/munge/munge.key"; chmod 0755 "$r/run/munge"
	rm -f "$r/run/munge/munged.pid" "$r/run/munge/munge.socket.2.lock" "$r/run/munge/munge.socket.2"
	start "munge$v" "$E2E_DIR/munged$v.out" chroot --userspec=munge:munge "$r" /usr/sbin/munged -F
	wait_for 15 "chroot munged ($r)" munge_ok_bed "$v" || { cat "$E2E_DIR/munged$v.out" >&2; die "chroot munge ($r) does not work"; }
}

# ---------------------------------------------------------------- A: 22.05

s22_env() { echo "export SLURM_CONF=$S22_CONF"; }

write_conf22() {
	rm -rf "$S22/state" "$S22/spool" "$S22/log"
	rm -f "$E2E_DIR"/*22*.out
	mkdir -p "$S22"/{state,spool,log}
	chmod 0755 "$E2E_DIR" "$S22"
	head -c 32 /dev/urandom >"$S22/jwt.key"
	chown -R slurm:slurm "$S22"
	chmod 0600 "$S22/jwt.key"
	printf '%s\n' "${GPUHC_S22_EXTRA:-}" >"$S22/extra.conf"
	chmod 0644 "$S22/extra.conf"
	install -m 0755 "$E2E_SRC/reboot.sh" "$S22/reboot.sh"
	cat >"$S22_CONF" <<EOF
# gpuhc e2e test bed A (Slurm 22.05), written by test/e2e/testbed.sh
ClusterName=gpuhc22
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=slurm
SlurmctldPort=$S22_CTLD_PORT
SlurmdPort=$S22_SLURMD_PORT
AuthType=auth/munge
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=$S22/jwt.key
StateSaveLocation=$S22/state
SlurmdSpoolDir=$S22/spool
SlurmctldPidFile=$S22/slurmctld.pid
SlurmdPidFile=$S22/slurmd.pid
SlurmctldLogFile=$S22/log/slurmctld.log
SlurmdLogFile=$S22/log/slurmd.log
$(common_conf)
NodeName=$S22_NODE NodeHostname=$HOST NodeAddr=127.0.0.1 CPUs=$(nproc) RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
Include $S22/extra.conf
EOF
	chmod 0644 "$S22_CONF"
}

s22() { SLURM_CONF=$S22_CONF "$@"; }

node22_idle() { s22 sinfo -h -n "$S22_NODE" -o '%T' 2>/dev/null | grep -qx 'idle'; }

dump_logs22() {
	local f
	for f in "$S22"/log/*.log "$E2E_DIR"/munged22.out "$E2E_DIR"/slurmrestd22.out; do
		[[ -f $f ]] || continue
		echo "===== $f (last 40 lines)" >&2; tail -40 "$f" >&2
	done
}

up22() {
	local t0=$SECONDS
	need_host_pkgs
	down22 quiet
	start_munge_host
	ensure_user
	write_conf22
	start slurmctld22 "$E2E_DIR/slurmctld22.out" /usr/sbin/slurmctld -D -i -f "$S22_CONF"
	wait_for 30 "slurmctld 22.05 ping" s22 scontrol ping || { dump_logs22; die "slurmctld 22.05 did not come up"; }
	start slurmd22 "$E2E_DIR/slurmd22.out" /usr/sbin/slurmd -D -f "$S22_CONF" -N "$S22_NODE"
	wait_for 45 "node $S22_NODE idle" node22_idle || { s22 sinfo >&2 || true; dump_logs22; die "node $S22_NODE did not become idle"; }
	s22 scontrol token username=slurm lifespan=86400 | sed -n 's/^SLURM_JWT=//p' >"$S22_TOKEN.tmp"
	[[ -s $S22_TOKEN.tmp ]] || die "scontrol token (22.05) gave nothing"
	chmod 0600 "$S22_TOKEN.tmp"; mv "$S22_TOKEN.tmp" "$S22_TOKEN"
	start slurmrestd22 "$E2E_DIR/slurmrestd22.out" setpriv --reuid="$REST_USER" --regid="$REST_USER" --clear-groups \
		env SLURM_CONF="$S22_CONF" SLURM_JWT=daemon /usr/sbin/slurmrestd -a rest_auth/jwt -s openapi/v0.0.38 \
		"127.0.0.1:$S22_REST_PORT"
	wait_for 20 "slurmrestd 22.05" http_up "http://127.0.0.1:$S22_REST_PORT/openapi/v3" ||
		{ dump_logs22; die "slurmrestd 22.05 did not come up"; }
	log "A (Slurm $(s22 scontrol --version | awk '{print $2}')) up in $((SECONDS - t0))s: node $S22_NODE idle, REST http://127.0.0.1:$S22_REST_PORT, SLURM_CONF=$S22_CONF"
}

down22() {
	stop slurmrestd22
	stop slurmd22
	stop slurmctld22
	kill_strays 22
	stop munge22
	[[ ${1:-} == quiet ]] || log "A down"
}

reconfig22() {
	cp "$1" "$S22/extra.conf"; chmod 0644 "$S22/extra.conf"
	s22 scontrol reconfigure
}

# ---------------------------------------------------------------- B, C: chroots
# One implementation for both chroot beds; each function takes the version
# (24 or 26) first. up24/up26, s24/s26, ... are the names the scenarios use.

mount_chroot() {
	bed "$1"
	local m
	mountpoint -q "$B_ROOT/proc" || mount -t proc proc "$B_ROOT/proc"
	for m in sys dev; do
		mountpoint -q "$B_ROOT/$m" || mount --bind "/$m" "$B_ROOT/$m"
	done
}

# umount_chroot [V]: everything mounted under the chroot (default 24).
umount_chroot() {
	bed "${1:-24}"
	local m
	[[ -d $B_ROOT ]] || return 0
	# deepest first; anything someone mounted below ours too
	for m in $(awk -v r="$B_ROOT/" 'index($2, r) == 1 {print $2}' /proc/mounts | sort -r); do
		umount "$m" 2>/dev/null || umount -l "$m" || log "could not unmount $m"
	done
}

s24() { chroot "$ROOT24" "$@"; }
s26() { chroot "$ROOT26" "$@"; }
s_bed() { local v=$1; shift; bed "$v"; chroot "$B_ROOT" "$@"; }

write_conf_bed() {
	bed "$1"
	local r=$B_ROOT n=${#B_NODES[@]}
	rm -rf --one-file-system "$B_DIR"
	rm -f "$E2E_DIR"/*"$B_V"*.out
	mkdir -p "$B_DIR"/{state,spool,log} "$r/etc/slurm" "$r/etc/gpuhc"
	chmod 0755 "$B_DIR"
	head -c 32 /dev/urandom >"$B_DIR/jwt.key"
	chroot "$r" chown -R slurm:slurm "$B_IN"
	chmod 0600 "$B_DIR/jwt.key"
	cp /etc/hosts "$r/etc/hosts"
	grep -qw "$HOST" "$r/etc/hosts" || echo "127.0.0.1 $HOST" >>"$r/etc/hosts"
	printf '%s\n' "$B_EXTRA" >"$B_DIR/extra.conf"
	chmod 0644 "$B_DIR/extra.conf"
	install -m 0755 "$E2E_SRC/reboot.sh" "$B_DIR/reboot.sh"
	cat >"$r/etc/slurm/slurm.conf" <<CONF
# gpuhc e2e test bed $B_LETTER (Slurm $B_LABEL), written by test/e2e/testbed.sh
ClusterName=gpuhc$B_V
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=slurm
SlurmctldPort=$B_CTLD_PORT
AuthType=auth/munge
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=$B_IN/jwt.key
StateSaveLocation=$B_IN/state
SlurmdSpoolDir=$B_IN/spool/%n
SlurmctldPidFile=$B_IN/slurmctld.pid
SlurmdPidFile=$B_IN/slurmd.%n.pid
SlurmctldLogFile=$B_IN/log/slurmctld.log
SlurmdLogFile=$B_IN/log/slurmd.%n.log
$(common_conf)
NodeName=gpu[001-00$n] NodeHostname=$HOST NodeAddr=127.0.0.1 Port=[$B_SLURMD_PORT-$((B_SLURMD_PORT + n - 1))] CPUs=$(nproc) RealMemory=1000 State=UNKNOWN
PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP
Include $B_IN/extra.conf
CONF
	printf 'CgroupPlugin=disabled\n' >"$r/etc/slurm/cgroup.conf"
	chmod 0644 "$r/etc/slurm/slurm.conf" "$r/etc/slurm/cgroup.conf"
}

# nodes_idle V: every node of the bed is idle.
nodes_idle() {
	bed "$1"
	local n
	n=$(chroot "$B_ROOT" sinfo -h -N -o '%N %T' 2>/dev/null | awk '$2 == "idle"' | wc -l)
	((n == ${#B_NODES[@]}))
}
nodes24_idle() { nodes_idle 24; }
nodes26_idle() { nodes_idle 26; }

dump_logs_bed() {
	bed "$1"
	local f
	for f in "$B_DIR"/log/*.log "$E2E_DIR/munged$B_V.out" "$E2E_DIR/slurmrestd$B_V.out"; do
		[[ -f $f ]] || continue
		echo "===== $f (last 40 lines)" >&2; tail -40 "$f" >&2
	done
}
dump_logs24() { dump_logs_bed 24; }
dump_logs26() { dump_logs_bed 26; }

write_token_bed() {
	bed "$1"
	local tmp=$B_TOKEN.tmp
	(umask 077; chroot "$B_ROOT" scontrol token username=slurm lifespan=86400 | sed -n 's/^SLURM_JWT=//p' >"$tmp")
	[[ -s $tmp ]] || die "scontrol token ($B_LABEL) gave nothing"
	chown root:root "$tmp"; chmod 0600 "$tmp"; mv "$tmp" "$B_TOKEN"
	log "token for user slurm in $B_TOKEN (chroot: $B_TOKEN_IN)"
}

start_restd_bed() {
	bed "$1"
	start "slurmrestd$B_V" "$E2E_DIR/slurmrestd$B_V.out" chroot --userspec="$REST_USER:$REST_USER" "$B_ROOT" \
		env SLURM_JWT=daemon /usr/sbin/slurmrestd -a rest_auth/jwt -s openapi/slurmctld "127.0.0.1:$B_REST_PORT"
	wait_for 20 "slurmrestd $B_LABEL" http_up "http://127.0.0.1:$B_REST_PORT/openapi/v3" ||
		{ dump_logs_bed "$1"; die "slurmrestd $B_LABEL did not come up"; }
}

up_bed() {
	local v=$1 t0=$SECONDS n
	need_host_pkgs
	need_chroot "$v"
	down_bed "$v" quiet
	mount_chroot "$v"
	start_munge_bed "$v"
	bed "$v"
	ensure_user "$B_ROOT"
	write_conf_bed "$v"
	start "slurmctld$v" "$E2E_DIR/slurmctld$v.out" chroot "$B_ROOT" /usr/sbin/slurmctld -D -i
	wait_for 30 "slurmctld $B_LABEL ping" s_bed "$v" scontrol ping || { dump_logs_bed "$v"; die "slurmctld $B_LABEL did not come up"; }
	for n in "${B_NODES[@]}"; do
		start "slurmd$v-$n" "$E2E_DIR/slurmd$v-$n.out" chroot "$B_ROOT" /usr/sbin/slurmd -D -N "$n"
	done
	wait_for 60 "nodes ${B_NODES[*]} idle" nodes_idle "$v" ||
		{ s_bed "$v" sinfo -N >&2 || true; dump_logs_bed "$v"; die "$B_LABEL nodes did not become idle"; }
	write_token_bed "$v"
	start_restd_bed "$v"
	log "$B_LETTER (Slurm $(s_bed "$v" scontrol --version | awk '{print $2}')) up in $((SECONDS - t0))s: nodes ${B_NODES[*]} idle, REST http://127.0.0.1:$B_REST_PORT, chroot $B_ROOT"
}

down_bed() {
	local v=$1
	if [[ -d $PIDS ]]; then
		stop "slurmrestd$v"
		stop_prefix "slurmd$v-"
		stop "slurmctld$v"
		stop "munge$v"
	fi
	bed "$v"
	[[ -d $B_ROOT ]] && kill_strays "$v"
	umount_chroot "$v"
	[[ ${2:-} == quiet ]] || log "$B_LETTER down"
}

reconfig_bed() {
	bed "$1"
	cp "$2" "$B_DIR/extra.conf"; chmod 0644 "$B_DIR/extra.conf"
	chroot "$B_ROOT" scontrol reconfigure
}

up24() { up_bed 24; }
up26() { up_bed 26; }
down24() { down_bed 24 "$@"; }
down26() { down_bed 26 "$@"; }
reconfig24() { reconfig_bed 24 "$1"; }
reconfig26() { reconfig_bed 26 "$1"; }
token24() { write_token_bed 24; }
token26() { write_token_bed 26; }

# ---------------------------------------------------------------- status/env

status() {
	local f n pid st
	shopt -s nullglob
	for f in "$PIDS"/*.pid; do
		n=$(basename "$f" .pid); pid=$(cat "$f")
		if alive "$pid"; then st=running; else st=dead; fi
		printf '%-20s %-8s %s\n' "$n" "$pid" "$st"
	done
	shopt -u nullglob
	[[ -f $S22_CONF ]] && { echo "--- A (22.05)"; s22 sinfo -N 2>&1 || true; }
	local v
	for v in 24 26; do
		bed "$v"
		[[ -f $B_ROOT/etc/slurm/slurm.conf ]] && mountpoint -q "$B_ROOT/proc" &&
			{ echo "--- $B_LETTER ($B_LABEL)"; s_bed "$v" sinfo -N 2>&1 || true; }
	done
	return 0
}

env_out() {
	cat <<EOF
export GPUHC_E2E_DIR=$E2E_DIR
export GPUHC_HOST=$HOST
export GPUHC_S22_DIR=$S22
export GPUHC_S22_CONF=$S22_CONF
export GPUHC_S22_NODE=$S22_NODE
export GPUHC_S22_URL=http://127.0.0.1:$S22_REST_PORT
export GPUHC_S22_TOKEN_FILE=$S22_TOKEN
EOF
	local v
	for v in 24 26; do
		bed "$v"
		cat <<EOF
export GPUHC_S${v}_ROOT=$B_ROOT
export GPUHC_S${v}_DIR=$B_DIR
export GPUHC_S${v}_DIR_IN=$B_IN
export GPUHC_S${v}_URL=http://127.0.0.1:$B_REST_PORT
export GPUHC_S${v}_TOKEN_FILE=$B_TOKEN
export GPUHC_S${v}_TOKEN_FILE_IN=$B_TOKEN_IN
export GPUHC_S${v}_NODES="${B_NODES[*]}"
EOF
	done
}

# ---------------------------------------------------------------- main

main() {
	[[ $(id -u) == 0 ]] || die "run as root"
	local cmd=${1:-}
	shift || true
	mkdir -p "$E2E_DIR"
	case $cmd in
	prepare) need_host_pkgs; need_chroot 24; need_chroot 26 ;;
	up) up22; up24; up26 ;;
	up22) up22 ;;
	up24 | up26) "$cmd" ;;
	down) down26; down24; down22 ;;
	down22) down22 ;;
	down24 | down26) "$cmd" ;;
	restart-restd24 | restart-restd26) stop "slurmrestd${cmd: -2}"; start_restd_bed "${cmd: -2}" ;;
	stop-restd24 | stop-restd26) stop "slurmrestd${cmd: -2}" ;;
	status) status ;;
	env) env_out ;;
	token22) cat "$S22_TOKEN" ;;
	token24 | token26) "$cmd" ;;
	reconfig22) reconfig22 "$1" ;;
	reconfig24 | reconfig26) "$cmd" "$1" ;;
	logs) dump_logs22; dump_logs24; dump_logs26 ;;
	stop) stop "$1" ;;
	*)
		sed -n '2,27p' "$0" >&2
		exit 2
		;;
	esac
}

# ------------------------------------------------------------------ scenario helpers
# Shared by run.sh and by spank.sh and jobs.sh run on their own.

# use_bed 24|26: point the scenario variables at one chroot test bed, so a
# scenario written once runs on 24.11 and on 26.05:
#   BV 24|26, BL "24.11"|"26.05" (in every PASS/FAIL line), BROOT,
#   BREST_PORT, BTOKEN (host path), BTOKEN_IN (chroot path), BNODES,
#   BREST the REST version gpuhc picks there (the highest with a node POST:
#   v0.0.42 on 24.11, v0.0.45 on 26.05, verified).
# sb CMD... runs CMD in that chroot, showb NODE is its `scontrol show node
# -o`, upb EXTRA brings it up with EXTRA as its extra slurm.conf lines, downb
# takes it down.
use_bed() {
	bed "$1"
	BV=$B_V BL=$B_LABEL BROOT=$B_ROOT BREST_PORT=$B_REST_PORT BTOKEN=$B_TOKEN BTOKEN_IN=$B_TOKEN_IN
	BNODES=("${B_NODES[@]}")
	case $BV in 24) BREST=v0.0.42 ;; 26) BREST=v0.0.45 ;; esac
	# The check deadline, per-check limit and Slurm call timeout the scenario
	# configs set. On
	# 26.05 the health check runs under HealthCheckTimeout=4 (below the
	# 5 s interval), where gpuhc fits its checks into half the limit and
	# --check-config refuses a deadline that does not fit
	# (docs/slurm-timeouts.md); 24.11 kills at a fixed 60 s.
	case $BV in
	24) BDEADLINE=20s BCHECK_TIMEOUT=5s BSLURM_TIMEOUT=5s ;;
	26) BDEADLINE=2s BCHECK_TIMEOUT=2s BSLURM_TIMEOUT=2s ;;
	esac
}
sb() { chroot "$BROOT" "$@"; }
showb() { sb scontrol show node -o "$1" 2>&1; }
upb() { local -x "GPUHC_S${BV}_EXTRA=$1"; up_bed "$BV"; }
downb() { down_bed "$BV" quiet; }

# Simulated reboots (reboot.sh, installed in every bed's directory; README
# "Simulated reboots"):
#   reboot_conf [RESUME_TIMEOUT]  slurm.conf lines for upb's EXTRA (the bed
#                       use_bed chose): RebootProgram=<bed>/reboot.sh and
#                       ResumeTimeout (default 60 s, Slurm's: a node not back
#                       by then goes DOWN); reboot22_conf the same for bed A.
#   reboot_exec         the command prefix a HealthCheckProgram wrapper puts
#                       before gpuhc-healthcheck so that it reads the node's
#                       simulated boot id (reboot22_exec on bed A).
#   boot_id_b NODE      the node's current simulated boot id ("" before its
#                       first reboot); reboots_b NODE how often it rebooted
#                       (boot_id22, reboots22 on bed A).
#   wait_reboots_b T NODE N  wait up to T s until NODE rebooted N times and
#                       its new slurmd runs (wait_reboots22 T N on bed A).
reboot_conf() { printf 'RebootProgram=%s/reboot.sh\nResumeTimeout=%s\n' "$B_IN" "${1:-60}"; }
reboot22_conf() { printf 'RebootProgram=%s/reboot.sh\nResumeTimeout=%s\n' "$S22" "${1:-60}"; }
reboot_exec() { echo "$B_IN/reboot.sh exec"; }
reboot22_exec() { echo "$S22/reboot.sh exec"; }
boot_id_b() { cat "$BROOT$B_IN/boot/$1" 2>/dev/null || true; }
boot_id22() { cat "$S22/boot/$S22_NODE" 2>/dev/null || true; }
reboots_b() { { wc -l <"$BROOT$B_IN/boot/$1.log"; } 2>/dev/null || echo 0; }
reboots22() { { wc -l <"$S22/boot/$S22_NODE.log"; } 2>/dev/null || echo 0; }
# the new slurmd (the last pid logged) is running
reboot_done() {
	local log=$1 n=$2 last
	[[ -f $log && $(wc -l <"$log") -ge $n ]] || return 1
	last=$(tail -1 "$log" | awk '{print $6}')
	alive "$last"
}
wait_reboots_b() { wait_for "$1" "$2 rebooted $3 times" reboot_done "$BROOT$B_IN/boot/$2.log" "$3"; }
wait_reboots22() { wait_for "$1" "$S22_NODE rebooted $2 times" reboot_done "$S22/boot/$S22_NODE.log" "$2"; }

# e2e_asserts NAME: the PASS/FAIL counters and the helpers scenarios use.
# expect DESCRIPTION CMD...: PASS if CMD succeeds; WHY, if set, says why not.
e2e_asserts() {
	E2E_NAME=$1 NPASS=0 NFAIL=0 T0=$SECONDS WHY=
	say() { printf '[%s %(%H:%M:%S)T +%03ds] %s\n' "$E2E_NAME" -1 $((SECONDS - T0)) "$*"; }
	pass() { NPASS=$((NPASS + 1)); echo "PASS: $*"; }
	fail() { NFAIL=$((NFAIL + 1)); echo "FAIL: $*"; }
	expect() {
		local d=$1; shift
		if "$@"; then pass "$d"; else fail "$d${WHY:+ ($WHY)}"; fi
		WHY=
	}
}

# e2e_lock PROGRAM: one e2e run or recording at a time (they share ports,
# paths and the chroot); fd 9 holds the lock until the process ends.
e2e_lock() {
	mkdir -p "$E2E_DIR"
	exec 9>"$E2E_DIR/.lock"
	flock -n 9 || { echo "$1: another e2e run or recording is in progress ($E2E_DIR/.lock)" >&2; exit 2; }
}

# e2e_standalone NAME [22|24|26]: spank.sh or jobs.sh as its own driver: runs
# NAME_scenario22, NAME_scenario24, NAME_scenario26 or all (NAME_scenarios), dumps the logs
# with NAME_dump on a failure, stops every daemon, exits 0 only if all
# passed.
e2e_standalone() {
	local name=$1 arg=${2:-}
	case $arg in '' | 22 | 24 | 26) ;; *) echo "usage: $name.sh [22|24|26]" >&2; exit 2 ;; esac
	[[ $(id -u) == 0 ]] || { echo "$name.sh: must run as root" >&2; exit 2; }
	e2e_asserts "$name"
	e2e_lock "$name.sh"
	trap "e2e_standalone_end $name" EXIT
	trap 'exit 130' INT TERM
	case $arg in
	22) "${name}_scenario22" ;;
	24) "${name}_scenario24" ;;
	26) "${name}_scenario26" ;;
	*) "${name}_scenarios" ;;
	esac
}

e2e_standalone_end() {
	local rc=$? name=$1
	trap - EXIT
	set +e
	((rc == 0)) || fail "$name.sh aborted (exit status $rc)"
	((NFAIL == 0)) || "${name}_dump"
	down26 quiet
	down24 quiet
	down22 quiet
	say "done in $((SECONDS - T0))s"
	echo "$name: $NPASS passed, $NFAIL failed"
	exit $((NFAIL == 0 ? 0 : 1))
}

# Sourced (for the helpers) or run.
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
	main "$@"
fi

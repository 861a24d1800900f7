#!/usr/bin/env bash
# gpuhc test bed: real Slurm on one machine (design.md §4).
#
#   A  Slurm 22.05 from the Debian 12 host packages: slurmctld + one slurmd
#      (NodeName = short hostname) + read-only slurmrestd (openapi/v0.0.38).
#      Config lives in a scratch dir and is passed with -f / SLURM_CONF, so
#      the host's /etc/slurm is never touched.
#   B  Slurm 24.11 in a debootstrapped Debian 13 (trixie) chroot, cached in
#      /var/cache/gpuhc-testbed/trixie: slurmctld, four simulated nodes
#      gpu[001-004] (one slurmd -N each), slurmrestd with rest_auth/jwt.
#
# Usage: testbed.sh up|up22|up24|down|down22|down24|status|env|token22|token24|logs
#        testbed.sh prepare      # install host packages / create the chroot only
#
# Hooks (set before up22/up24): GPUHC_S22_EXTRA / GPUHC_S24_EXTRA hold extra
# slurm.conf lines (e.g. HealthCheckProgram=...). `testbed.sh reconfig22 FILE`
# / `reconfig24 FILE` replace the extra lines later and run scontrol reconfigure.
#
# Every daemon is started in the foreground (-D/-F) in the background of this
# script; its PID is recorded under $GPUHC_E2E_DIR/pids and `down` kills exactly
# those PIDs (plus leftovers proven ours: chroot'ed into our root, or started
# with our config file).
set -euo pipefail

E2E_DIR=${GPUHC_E2E_DIR:-/tmp/gpuhc-e2e}
CACHE=${GPUHC_TESTBED_CACHE:-/var/cache/gpuhc-testbed}
ROOT24=${GPUHC_TESTBED_ROOT:-$CACHE/trixie}
SUITE24=${GPUHC_TESTBED_SUITE:-trixie}
MIRROR=${GPUHC_TESTBED_MIRROR:-http://deb.debian.org/debian}
PIDS=$E2E_DIR/pids
HOST=$(hostname -s)

# --- A: Slurm 22.05 on the host ---
S22=$E2E_DIR/s22
S22_CONF=$S22/slurm.conf
S22_CTLD_PORT=${GPUHC_S22_CTLD_PORT:-16817}
S22_SLURMD_PORT=${GPUHC_S22_SLURMD_PORT:-16818}
S22_REST_PORT=${GPUHC_S22_REST_PORT:-16820}
S22_NODE=$HOST
S22_TOKEN=$S22/token            # root-only 0600, raw JWT for user slurm

# --- B: Slurm 24.11 in the chroot ---
S24_IN=/srv/gpuhc-e2e           # path inside the chroot
S24=$ROOT24$S24_IN              # same, seen from the host
S24_CTLD_PORT=${GPUHC_S24_CTLD_PORT:-17817}
S24_SLURMD_PORT=${GPUHC_S24_SLURMD_PORT:-17821}   # gpu001..gpu004 = +0..+3
S24_REST_PORT=${GPUHC_S24_REST_PORT:-17830}
S24_NODES=(gpu001 gpu002 gpu003 gpu004)
S24_TOKEN_IN=/etc/gpuhc/slurmrestd.token          # inside the chroot, 0600 root
S24_TOKEN=$ROOT24$S24_TOKEN_IN

REST_USER=gpuhcrest             # slurmrestd refuses root and SlurmUser

HOST_PKGS=(munge slurmctld slurmd slurmrestd slurm-client slurm-wlm-jwt-plugin
           libslurm-dev debootstrap jq curl util-linux iproute2 procps)
CHROOT_PKGS=slurmctld,slurmd,slurmrestd,slurm-client,slurm-wlm-jwt-plugin,munge,curl

# common_conf prints the slurm.conf lines both test beds share: no cgroups,
# no accounting, nodes back in service on their own (design.md §4).
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
# root (B), or host slurm daemons started with our config file (A).
kill_strays() {
	local which=$1 p root cmd envs
	for p in /proc/[0-9]*; do
		p=${p#/proc/}
		[[ $p == "$$" ]] && continue
		if [[ $which == 24 ]]; then
			root=$(readlink "/proc/$p/root" 2>/dev/null) || continue
			[[ $root == "$ROOT24" ]] || continue
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

chroot_ok() {
	[[ -f $ROOT24/.gpuhc-testbed-ok ]] && return 0
	local f
	for f in usr/sbin/slurmctld usr/sbin/slurmd usr/sbin/slurmrestd usr/bin/scontrol \
		usr/sbin/munged usr/bin/curl usr/lib/x86_64-linux-gnu/slurm-wlm/auth_jwt.so; do
		[[ -e $ROOT24/$f ]] || return 1
	done
	date -u +%FT%TZ >"$ROOT24/.gpuhc-testbed-ok"
}

need_chroot() {
	chroot_ok && return 0
	umount_chroot
	if [[ -e $ROOT24 ]]; then
		log "chroot $ROOT24 is incomplete; recreating"
		# never rm -rf across a live mount
		if grep -q " $ROOT24/" /proc/mounts; then die "mounts left under $ROOT24; refusing to remove it"; fi
		rm -rf --one-file-system "$ROOT24"
	fi
	mkdir -p "$(dirname "$ROOT24")"
	log "debootstrap $SUITE24 into $ROOT24 (a few minutes)"
	debootstrap --variant=minbase --include="$CHROOT_PKGS" "$SUITE24" "$ROOT24" "$MIRROR" \
		>"$CACHE/debootstrap.log" 2>&1 || { tail -30 "$CACHE/debootstrap.log" >&2; die "debootstrap failed"; }
	chroot_ok || die "chroot lacks slurm binaries after debootstrap"
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
munge_ok_24() { chroot "$ROOT24" sh -c 'munge -n | unmunge' >/dev/null 2>&1; }

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

start_munge_24() {
	if munge_ok_24; then log "chroot munge already works; reusing it"; return 0; fi
	local r=$ROOT24
	[[ -s $r/etc/munge/munge.key ]] || chroot "$r" /usr/sbin/mungekey --create --force
	mkdir -p "$r/run/munge" "$r/var/lib/munge" "$r/var/log/munge"
	chroot "$r" chown -R munge: /etc/munge /run/munge /var/lib/munge /var/log/munge
	chmod 0700 "$r/etc/munge"; chmod 0600 "$r/etc/munge/munge.key"; chmod 0755 "$r/run/munge"
	rm -f "$r/run/munge/munged.pid" "$r/run/munge/munge.socket.2.lock" "$r/run/munge/munge.socket.2"
	start munge24 "$E2E_DIR/munged24.out" chroot --userspec=munge:munge "$r" /usr/sbin/munged -F
	wait_for 15 "chroot munged" munge_ok_24 || { cat "$E2E_DIR/munged24.out" >&2; die "chroot munge does not work"; }
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

# ---------------------------------------------------------------- B: 24.11

mount_chroot() {
	local m
	mountpoint -q "$ROOT24/proc" || mount -t proc proc "$ROOT24/proc"
	for m in sys dev; do
		mountpoint -q "$ROOT24/$m" || mount --bind "/$m" "$ROOT24/$m"
	done
}

umount_chroot() {
	local m
	[[ -d $ROOT24 ]] || return 0
	# deepest first; anything someone mounted below ours too
	for m in $(awk -v r="$ROOT24/" 'index($2, r) == 1 {print $2}' /proc/mounts | sort -r); do
		umount "$m" 2>/dev/null || umount -l "$m" || log "could not unmount $m"
	done
}

s24() { chroot "$ROOT24" "$@"; }

write_conf24() {
	local r=$ROOT24
	rm -rf --one-file-system "$S24"
	rm -f "$E2E_DIR"/*24*.out
	mkdir -p "$S24"/{state,spool,log} "$r/etc/slurm" "$r/etc/gpuhc"
	chmod 0755 "$S24"
	head -c 32 /dev/urandom >"$S24/jwt.key"
	s24 chown -R slurm:slurm "$S24_IN"
	chmod 0600 "$S24/jwt.key"
	cp /etc/hosts "$r/etc/hosts"
	grep -qw "$HOST" "$r/etc/hosts" || echo "127.0.0.1 $HOST" >>"$r/etc/hosts"
	printf '%s\n' "${GPUHC_S24_EXTRA:-}" >"$S24/extra.conf"
	chmod 0644 "$S24/extra.conf"
	local last=$((S24_SLURMD_PORT + ${#S24_NODES[@]} - 1))
	cat >"$r/etc/slurm/slurm.conf" <<EOF
# gpuhc e2e test bed B (Slurm 24.11), written by test/e2e/testbed.sh
ClusterName=gpuhc24
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=slurm
SlurmctldPort=$S24_CTLD_PORT
AuthType=auth/munge
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=$S24_IN/jwt.key
StateSaveLocation=$S24_IN/state
SlurmdSpoolDir=$S24_IN/spool/%n
SlurmctldPidFile=$S24_IN/slurmctld.pid
SlurmdPidFile=$S24_IN/slurmd.%n.pid
SlurmctldLogFile=$S24_IN/log/slurmctld.log
SlurmdLogFile=$S24_IN/log/slurmd.%n.log
$(common_conf)
NodeName=gpu[001-00${#S24_NODES[@]}] NodeHostname=$HOST NodeAddr=127.0.0.1 Port=[$S24_SLURMD_PORT-$last] CPUs=$(nproc) RealMemory=1000 State=UNKNOWN
PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP
Include $S24_IN/extra.conf
EOF
	printf 'CgroupPlugin=disabled\n' >"$r/etc/slurm/cgroup.conf"
	chmod 0644 "$r/etc/slurm/slurm.conf" "$r/etc/slurm/cgroup.conf"
}

nodes24_idle() {
	local n
	n=$(s24 sinfo -h -N -o '%N %T' 2>/dev/null | awk '$2 == "idle"' | wc -l)
	((n == ${#S24_NODES[@]}))
}

dump_logs24() {
	local f
	for f in "$S24"/log/*.log "$E2E_DIR"/munged24.out "$E2E_DIR"/slurmrestd24.out; do
		[[ -f $f ]] || continue
		echo "===== $f (last 40 lines)" >&2; tail -40 "$f" >&2
	done
}

write_token24() {
	local tmp=$S24_TOKEN.tmp
	(umask 077; s24 scontrol token username=slurm lifespan=86400 | sed -n 's/^SLURM_JWT=//p' >"$tmp")
	[[ -s $tmp ]] || die "scontrol token (24.11) gave nothing"
	chown root:root "$tmp"; chmod 0600 "$tmp"; mv "$tmp" "$S24_TOKEN"
	log "token for user slurm in $S24_TOKEN (chroot: $S24_TOKEN_IN)"
}

start_restd24() {
	start slurmrestd24 "$E2E_DIR/slurmrestd24.out" chroot --userspec="$REST_USER:$REST_USER" "$ROOT24" \
		env SLURM_JWT=daemon /usr/sbin/slurmrestd -a rest_auth/jwt -s openapi/slurmctld "127.0.0.1:$S24_REST_PORT"
	wait_for 20 "slurmrestd 24.11" http_up "http://127.0.0.1:$S24_REST_PORT/openapi/v3" ||
		{ dump_logs24; die "slurmrestd 24.11 did not come up"; }
}

up24() {
	local t0=$SECONDS n i
	need_host_pkgs
	need_chroot
	down24 quiet
	mount_chroot
	start_munge_24
	ensure_user "$ROOT24"
	write_conf24
	start slurmctld24 "$E2E_DIR/slurmctld24.out" chroot "$ROOT24" /usr/sbin/slurmctld -D -i
	wait_for 30 "slurmctld 24.11 ping" s24 scontrol ping || { dump_logs24; die "slurmctld 24.11 did not come up"; }
	for i in "${!S24_NODES[@]}"; do
		n=${S24_NODES[$i]}
		start "slurmd24-$n" "$E2E_DIR/slurmd24-$n.out" chroot "$ROOT24" /usr/sbin/slurmd -D -N "$n"
	done
	wait_for 60 "nodes gpu[001-004] idle" nodes24_idle || { s24 sinfo -N >&2 || true; dump_logs24; die "24.11 nodes did not become idle"; }
	write_token24
	start_restd24
	log "B (Slurm $(s24 scontrol --version | awk '{print $2}')) up in $((SECONDS - t0))s: nodes ${S24_NODES[*]} idle, REST http://127.0.0.1:$S24_REST_PORT, chroot $ROOT24"
}

down24() {
	if [[ -d $PIDS ]]; then
		stop slurmrestd24
		stop_prefix slurmd24-
		stop slurmctld24
		stop munge24
	fi
	[[ -d $ROOT24 ]] && kill_strays 24
	umount_chroot
	[[ ${1:-} == quiet ]] || log "B down"
}

reconfig24() {
	cp "$1" "$S24/extra.conf"; chmod 0644 "$S24/extra.conf"
	s24 scontrol reconfigure
}

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
	[[ -f $ROOT24/etc/slurm/slurm.conf ]] && mountpoint -q "$ROOT24/proc" && { echo "--- B (24.11)"; s24 sinfo -N 2>&1 || true; }
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
export GPUHC_S24_ROOT=$ROOT24
export GPUHC_S24_DIR=$S24
export GPUHC_S24_DIR_IN=$S24_IN
export GPUHC_S24_URL=http://127.0.0.1:$S24_REST_PORT
export GPUHC_S24_TOKEN_FILE=$S24_TOKEN
export GPUHC_S24_TOKEN_FILE_IN=$S24_TOKEN_IN
export GPUHC_S24_NODES="${S24_NODES[*]}"
EOF
}

# ---------------------------------------------------------------- main

main() {
	[[ $(id -u) == 0 ]] || die "run as root"
	local cmd=${1:-}
	shift || true
	mkdir -p "$E2E_DIR"
	case $cmd in
	prepare) need_host_pkgs; need_chroot ;;
	up) up22; up24 ;;
	up22) up22 ;;
	up24) up24 ;;
	down) down24; down22 ;;
	down22) down22 ;;
	down24) down24 ;;
	restart-restd24) stop slurmrestd24; start_restd24 ;;
	stop-restd24) stop slurmrestd24 ;;
	status) status ;;
	env) env_out ;;
	token22) cat "$S22_TOKEN" ;;
	token24) write_token24 ;;
	reconfig22) reconfig22 "$1" ;;
	reconfig24) reconfig24 "$1" ;;
	logs) dump_logs22; dump_logs24 ;;
	stop) stop "$1" ;;
	*)
		sed -n '2,22p' "$0" >&2
		exit 2
		;;
	esac
}

# ------------------------------------------------------------------ scenario helpers
# Shared by run.sh and by spank.sh and jobs.sh run on their own.

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

# e2e_standalone NAME [22|24]: spank.sh or jobs.sh as its own driver: runs
# NAME_scenario22, NAME_scenario24 or both (NAME_scenarios), dumps the logs
# with NAME_dump on a failure, stops every daemon, exits 0 only if all
# passed.
e2e_standalone() {
	local name=$1 arg=${2:-}
	case $arg in '' | 22 | 24) ;; *) echo "usage: $name.sh [22|24]" >&2; exit 2 ;; esac
	[[ $(id -u) == 0 ]] || { echo "$name.sh: must run as root" >&2; exit 2; }
	e2e_asserts "$name"
	e2e_lock "$name.sh"
	trap "e2e_standalone_end $name" EXIT
	trap 'exit 130' INT TERM
	case $arg in
	22) "${name}_scenario22" ;;
	24) "${name}_scenario24" ;;
	*) "${name}_scenarios" ;;
	esac
}

e2e_standalone_end() {
	local rc=$? name=$1
	trap - EXIT
	set +e
	((rc == 0)) || fail "$name.sh aborted (exit status $rc)"
	((NFAIL == 0)) || "${name}_dump"
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

#!/usr/bin/env bash
# gpuhc end-to-end scenarios against real Slurm (make e2e; root only).
#
#  1. Slurm 22.05 on the host: slurmd itself runs bin/gpuhc-healthcheck as
#     HealthCheckProgram every 5 s (through a wrapper, since the program
#     cannot take arguments); a required tmpfs mount is unmounted to inject a
#     fault. Node control: scontrol.
#  2. Slurm 24.11 in the trixie chroot, four simulated nodes: the binary is
#     copied into the chroot and run by every slurmd as HealthCheckProgram; a
#     per-host override makes only gpu002 need the mount. Node control: REST
#     (scontrol configured as /nonexistent/scontrol to prove it), then with
#     slurmrestd stopped, the fallback to the chroot's real /usr/bin/scontrol.
#
# Prints PASS:/FAIL: lines and ends with "e2e: N passed, M failed"; exits 1
# if anything failed. Everything started is stopped by PID on exit.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
BIN=${GPUHC_BIN:-$REPO/bin/gpuhc-healthcheck}
# shellcheck source=testbed.sh
source "$HERE/testbed.sh"

WAIT=${GPUHC_E2E_WAIT:-30}      # seconds allowed for a drain or a resume
QUIET_RUNS=3                    # health-check runs that must change nothing

NPASS=0 NFAIL=0
T0=$SECONDS

say() { printf '[e2e %(%H:%M:%S)T +%03ds] %s\n' -1 $((SECONDS - T0)) "$*"; }
pass() { NPASS=$((NPASS + 1)); echo "PASS: $*"; }
fail() { NFAIL=$((NFAIL + 1)); echo "FAIL: $*"; }
# expect DESCRIPTION CMD...: PASS if CMD succeeds.
expect() {
	local d=$1; shift
	if "$@"; then pass "$d"; else fail "$d${WHY:+ ($WHY)}"; fi
	WHY=
}

[[ $(id -u) == 0 ]] || { echo "e2e: must run as root" >&2; exit 2; }
# One e2e run or recording at a time: they share ports, paths and the chroot.
mkdir -p "$E2E_DIR"
exec 9>"$E2E_DIR/.lock"
flock -n 9 || { echo "$(basename "$0"): another e2e run or recording is in progress ($E2E_DIR/.lock)" >&2; exit 2; }

[[ -x $BIN ]] || { echo "e2e: $BIN missing; run make build" >&2; exit 2; }
"$BIN" --version >/dev/null || { echo "e2e: $BIN --version failed" >&2; exit 2; }

# ------------------------------------------------------------------ files

HC22=$E2E_DIR/hc22                  # scenario 1 files (host)
MNT22=$E2E_DIR/mnt22                # the required mount, scenario 1
HC24_IN=/srv/gpuhc-hc               # scenario 2 files (inside the chroot)
HC24=$ROOT24$HC24_IN
MNT24_IN=/srv/gpuhc-mnt             # the required mount of gpu002
MNT24=$ROOT24$MNT24_IN

cleanup() {
	local rc=$?
	trap - EXIT
	set +e
	if ((rc != 0)); then
		fail "e2e aborted (exit status $rc) before all scenarios ran"
	fi
	if ((NFAIL > 0)); then dump_all; fi
	say "tearing down"
	down24 quiet
	down22 quiet
	mountpoint -q "$MNT22" && umount "$MNT22"
	say "done in $((SECONDS - T0))s"
	echo "e2e: $NPASS passed, $NFAIL failed"
	((NFAIL == 0)) || exit 1
	exit 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM

dump_all() {
	echo "======== logs (failure)"
	local d f dirs=()
	if [[ -n ${RAN22:-} ]]; then dump_logs22 2>&1; dirs+=("$HC22"); fi
	if [[ -n ${RAN24:-} ]]; then dump_logs24 2>&1; dirs+=("$HC24"); fi
	for d in "${dirs[@]}"; do
		for f in "$d"/runs.*.log "$d"/log/*; do
			[[ -f $f ]] || continue
			echo "===== $f (last 60 lines)"; tail -60 "$f"
		done
	done
}

# ------------------------------------------------------------------ helpers

# show22/show24 NODE: one line of `scontrol show node -o`
show22() { SLURM_CONF=$S22_CONF scontrol show node -o "$1" 2>&1; }
show24() { s24 scontrol show node -o "$1" 2>&1; }
state_of() { sed -n 's/.* State=\([^ ]*\) .*/\1/p' <<<"$1"; }
# Reason=TEXT [user@time] is the last field of the line.
reason_of() { sed -n 's/.* Reason=\(.*\) \[[^]]*\]$/\1/p' <<<"$1"; }
reason_user_of() { sed -n 's/.* Reason=.* \[\([^@]*\)@[^]]*\]$/\1/p' <<<"$1"; }

# node_is SHOWFN NODE drained|clean [REASON_PREFIX [REASON_USER]]
#   drained: DRAIN flag and reason starts with REASON_PREFIX (and set by USER)
#   clean:   no DRAIN flag and base state IDLE
node_is() {
	local fn=$1 node=$2 want=$3 prefix=${4:-} user=${5:-} line st r u
	line=$($fn "$node")
	st=$(state_of "$line"); r=$(reason_of "$line"); u=$(reason_user_of "$line")
	WHY="state=$st reason='$r' by=$u"
	case $want in
	drained)
		[[ $st == *DRAIN* && $r == "$prefix"* ]] || return 1
		[[ -z $user || $u == "$user" ]]
		;;
	clean) [[ $st != *DRAIN* && $st == IDLE* ]] ;;
	esac
}

# wait_node TIMEOUT SHOWFN NODE drained|clean [PREFIX [USER]]
wait_node() {
	local t=$1; shift
	local end=$((SECONDS + t))
	until node_is "$@"; do
		((SECONDS < end)) || return 1
		sleep 0.5
	done
}

count() { local n; n=$(grep -c "$1" "$2" 2>/dev/null) || true; echo "${n:-0}"; }
runs() { count '^=== run' "$1/runs.$2.log"; }

# wait_runs DIR NODE N: wait until N more health-check runs finished on NODE
wait_runs() {
	local dir=$1 node=$2 n=$3 start end
	start=$(finished "$dir" "$node")
	end=$((SECONDS + n * 10 + 20))
	until (($(finished "$dir" "$node") >= start + n)); do
		((SECONDS < end)) || { WHY="only $(($(finished "$dir" "$node") - start)) of $n runs in time"; return 1; }
		sleep 0.5
	done
}
# finished DIR NODE: runs that printed their policy line
finished() { count '^policy' "$1/runs.$2.log"; }

last_policy() { { grep '^policy' "$1/runs.$2.log" 2>/dev/null || true; } | tail -1; }

# unchanged_for SHOWFN NODE DIR RUNS drained PREFIX: the node stays as it is
# across RUNS health-check runs.
stays() {
	local fn=$1 node=$2 dir=$3 n=$4; shift 4
	local start end
	start=$(finished "$dir" "$node")
	end=$((SECONDS + n * 10 + 20))
	while (($(finished "$dir" "$node") < start + n)); do
		node_is "$fn" "$node" "$@" || return 1
		((SECONDS < end)) || { WHY="only $(($(finished "$dir" "$node") - start)) of $n runs in time"; return 1; }
		sleep 0.5
	done
	node_is "$fn" "$node" "$@"
}

# hc_wrapper FILE BINARY CONFIG RUNDIR [EXPORTS]: the HealthCheckProgram.
# It does nothing until RUNDIR/armed exists, so the runs slurmd makes while
# the test bed is still coming up (22.05 runs it before registering) do not
# race the fixture setup.
hc_wrapper() {
	cat >"$1" <<EOF
#!/bin/sh
# gpuhc e2e HealthCheckProgram: slurmd passes no arguments and only
# SLURMD_NODENAME in the environment.
[ -e $4/armed ] || exit 0
${5:-}
echo "=== run \$SLURMD_NODENAME" >>$4/runs.\$SLURMD_NODENAME.log
exec $2 --config $3 >>$4/runs.\$SLURMD_NODENAME.log 2>&1
EOF
	chmod 0755 "$1"
}

# ================================================================== scenario 1
scenario22() {
	say "scenario 1: Slurm 22.05 on the host, HealthCheckProgram + scontrol"
	RAN22=1
	local node=$S22_NODE prefix="gpuhc: host.mounts: $MNT22:"
	down22 quiet
	mountpoint -q "$MNT22" && umount "$MNT22"
	rm -rf "$HC22"
	mkdir -p "$HC22"/{state,log} "$MNT22"
	mount -t tmpfs -o size=8m gpuhc-e2e "$MNT22"
	install -m 0755 "$BIN" "$HC22/gpuhc-healthcheck"
	cat >"$HC22/gpuhc.toml" <<EOF
# gpuhc e2e, scenario 1 (Slurm 22.05, scontrol)
state_dir = "$HC22/state/%n"
lock_file = "$HC22/state/%n.lock"
deadline = "20s"
check_timeout = "5s"

[log]
level = "debug"
file = "$HC22/log/%n.jsonl"

[events]
file = "$HC22/log/%n.events.jsonl"

[policy]
resume_after = 2

[slurm]
backend = "scontrol"
scontrol = "/usr/bin/scontrol"
timeout = "10s"
retries = 1

[checks.thermal]
enabled = false

[[checks.mounts.mount]]
path = "$MNT22"
fstype = "tmpfs"
writable = true
EOF
	# The test bed never writes /etc/slurm on the host, so scontrol needs
	# SLURM_CONF; gpuhc passes SLURM_CONF through to scontrol.
	hc_wrapper "$HC22/healthcheck.sh" "$HC22/gpuhc-healthcheck" "$HC22/gpuhc.toml" "$HC22" \
		"SLURM_CONF=$S22_CONF; export SLURM_CONF"
	expect "22.05: --check-config accepts the e2e config" \
		"$BIN" --check-config "$HC22/gpuhc.toml"

	GPUHC_S22_EXTRA="HealthCheckProgram=$HC22/healthcheck.sh
HealthCheckInterval=5
HealthCheckNodeState=ANY" up22
	touch "$HC22/armed"

	# healthy steady state
	WHY=
	if wait_runs "$HC22" "$node" 2; then
		expect "22.05: healthy node stays idle over 2 slurmd-run checks" node_is show22 "$node" clean
		WHY="last: $(last_policy "$HC22" "$node")"
		expect "22.05: healthy run makes zero Slurm calls" \
			grep -q '^policy: none \[0 Slurm calls\]' <(last_policy "$HC22" "$node")
	else
		fail "22.05: slurmd runs HealthCheckProgram every 5 s ($WHY)"
	fi

	# fault -> drain
	umount "$MNT22"
	say "22.05: unmounted $MNT22"
	expect "22.05: slurmd's run drains the node within ${WAIT}s, reason '$prefix …'" \
		wait_node "$WAIT" show22 "$node" drained "$prefix"

	# fault removed -> resume
	mount -t tmpfs -o size=8m gpuhc-e2e "$MNT22"
	say "22.05: mounted $MNT22 again"
	expect "22.05: resumed automatically once healthy (idle, no DRAIN) within ${WAIT}s" \
		wait_node "$WAIT" show22 "$node" clean

	# admin drain on a healthy node, then the fault: never re-reasoned
	SLURM_CONF=$S22_CONF scontrol update NodeName="$node" State=DRAIN Reason="maintenance"
	umount "$MNT22"
	say "22.05: admin drained $node ('maintenance'), unmounted $MNT22"
	expect "22.05: admin drain keeps reason 'maintenance' over $QUIET_RUNS faulty runs" \
		stays show22 "$node" "$HC22" "$QUIET_RUNS" drained "maintenance"
	mount -t tmpfs -o size=8m gpuhc-e2e "$MNT22"
	say "22.05: mounted $MNT22 again"
	expect "22.05: admin drain is not resumed over $QUIET_RUNS healthy runs" \
		stays show22 "$node" "$HC22" "$QUIET_RUNS" drained "maintenance"
	SLURM_CONF=$S22_CONF scontrol update NodeName="$node" State=RESUME
	wait_node 15 show22 "$node" clean || true

	# gpuhc drains, an admin takes the drain over, the fault goes: not resumed
	umount "$MNT22"
	say "22.05: unmounted $MNT22 (admin takeover case)"
	if wait_node "$WAIT" show22 "$node" drained "$prefix"; then
		SLURM_CONF=$S22_CONF scontrol update NodeName="$node" State=DRAIN Reason="maintenance"
		mount -t tmpfs -o size=8m gpuhc-e2e "$MNT22"
		say "22.05: admin re-reasoned the drain ('maintenance'), mounted $MNT22 again"
		expect "22.05: a gpuhc drain taken over by an admin is not resumed over $QUIET_RUNS healthy runs" \
			stays show22 "$node" "$HC22" "$QUIET_RUNS" drained "maintenance"
	else
		fail "22.05: a gpuhc drain taken over by an admin is not resumed (no drain to take over: $WHY)"
		mountpoint -q "$MNT22" || mount -t tmpfs -o size=8m gpuhc-e2e "$MNT22"
	fi
	SLURM_CONF=$S22_CONF scontrol update NodeName="$node" State=RESUME || true

	down22 quiet
	umount "$MNT22"
}

# ================================================================== scenario 2
scenario24() {
	say "scenario 2: Slurm 24.11 chroot, 4 nodes, HealthCheckProgram + REST, then scontrol"
	RAN24=1
	local prefix="gpuhc: host.mounts: $MNT24_IN:" n
	need_chroot
	down24 quiet
	rm -rf --one-file-system "$HC24"
	mkdir -p "$HC24"/{state,log} "$MNT24"
	install -m 0755 "$BIN" "$HC24/gpuhc-healthcheck"
	hc_wrapper "$HC24/healthcheck.sh" "$HC24_IN/gpuhc-healthcheck" "$HC24_IN/gpuhc.toml" "$HC24_IN"
	write_conf_24 "/nonexistent/scontrol"

	GPUHC_S24_EXTRA="HealthCheckProgram=$HC24_IN/healthcheck.sh
HealthCheckInterval=5
HealthCheckNodeState=ANY" up24
	mount -t tmpfs -o size=8m gpuhc-e2e "$MNT24"
	touch "$HC24/armed"
	expect "24.11: --check-config accepts the e2e config (in the chroot)" \
		s24 "$HC24_IN/gpuhc-healthcheck" --check-config "$HC24_IN/gpuhc.toml"

	wait_runs "$HC24" gpu002 1 || true
	umount "$MNT24"
	say "24.11: unmounted $MNT24_IN (needed by gpu002 only)"
	expect "24.11: gpu002 drained through REST (scontrol=/nonexistent) within ${WAIT}s, reason set by 'slurm'" \
		wait_node "$WAIT" show24 gpu002 drained "$prefix" slurm
	WHY="$(last_policy "$HC24" gpu002)"
	expect "24.11: the drain went through slurmrestd" \
		grep -q 'via rest v0.0.4' "$HC24/runs.gpu002.log"
	local others=ok
	for n in gpu001 gpu003 gpu004; do
		node_is show24 "$n" clean || others="$n: $WHY"
	done
	WHY=$others
	expect "24.11: gpu001, gpu003, gpu004 stay idle" [ "$others" = ok ]

	mount -t tmpfs -o size=8m gpuhc-e2e "$MNT24"
	say "24.11: mounted $MNT24_IN again"
	expect "24.11: gpu002 resumed within ${WAIT}s" \
		wait_node "$WAIT" show24 gpu002 clean
	WHY="$(grep '^policy: resumed' "$HC24/runs.gpu002.log" | tail -1)" || true
	expect "24.11: the resume went through slurmrestd" \
		grep -q '^policy: resumed.*via rest v0.0.4' "$HC24/runs.gpu002.log"

	# slurmrestd down: auto falls back to the chroot's real scontrol
	stop slurmrestd24
	write_conf_24 "/usr/bin/scontrol"
	wait_runs "$HC24" gpu002 1 || true
	umount "$MNT24"
	say "24.11: stopped slurmrestd, scontrol=/usr/bin/scontrol, unmounted $MNT24_IN"
	expect "24.11: without slurmrestd gpu002 is drained through scontrol within ${WAIT}s (reason set by root)" \
		wait_node "$WAIT" show24 gpu002 drained "$prefix" root
	mount -t tmpfs -o size=8m gpuhc-e2e "$MNT24"
	say "24.11: mounted $MNT24_IN again"
	expect "24.11: without slurmrestd gpu002 is resumed within ${WAIT}s" \
		wait_node "$WAIT" show24 gpu002 clean
	WHY="$(grep '^policy: ' "$HC24/runs.gpu002.log" | tail -4 | tr '\n' '|')" || true
	expect "24.11: without slurmrestd the drain and resume went through scontrol" \
		eval "grep '^policy: drained' '$HC24/runs.gpu002.log' | tail -1 | grep -q 'via scontrol' &&
		      grep '^policy: resumed' '$HC24/runs.gpu002.log' | tail -1 | grep -q 'via scontrol'"

	down24 quiet
}

# write_conf_24 SCONTROL: the chroot config (REST url + token, scontrol path)
write_conf_24() {
	cat >"$HC24/gpuhc.toml.tmp" <<EOF
# gpuhc e2e, scenario 2 (Slurm 24.11 chroot)
state_dir = "$HC24_IN/state/%n"
lock_file = "$HC24_IN/state/%n.lock"
deadline = "20s"
check_timeout = "5s"

[log]
level = "debug"
file = "$HC24_IN/log/%n.jsonl"

[events]
file = "$HC24_IN/log/%n.events.jsonl"

[policy]
resume_after = 2

[slurm]
backend = "auto"
url = "http://127.0.0.1:$S24_REST_PORT"
token_file = "$S24_TOKEN_IN"
user = "slurm"
scontrol = "$1"
timeout = "5s"
retries = 1

[checks.thermal]
enabled = false

[[host]]
match = "gpu002"
[[host.checks.mounts.mount]]
path = "$MNT24_IN"
fstype = "tmpfs"
writable = true
EOF
	mv "$HC24/gpuhc.toml.tmp" "$HC24/gpuhc.toml"
}

# ================================================================== main
say "binary: $("$BIN" --version)"
[[ ${GPUHC_E2E_ONLY:-} == 24 ]] || scenario22
[[ ${GPUHC_E2E_ONLY:-} == 22 ]] || scenario24

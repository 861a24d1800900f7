#!/usr/bin/env bash
# gpuhc end-to-end scenarios against real Slurm (make e2e; root only).
#
#  1. Slurm 22.05 on the host: slurmd itself runs bin/gpuhc-healthcheck as
#     HealthCheckProgram every 5 s (through a wrapper, since the program
#     cannot take arguments); a required tmpfs mount is unmounted to inject a
#     fault. Node control: scontrol.
#  Scenarios 2 to 6 run on Slurm 24.11 (trixie chroot) and again on 26.05
#  (forky chroot): use_bed_run points the scenario variables at one bed;
#  PASS/FAIL lines carry the version ("26.05 (4): ..."). Below, "24.11"
#  stands for either.
#  2. Slurm 24.11 in the trixie chroot, four simulated nodes: the binary is
#     copied into the chroot and run by every slurmd as HealthCheckProgram; a
#     per-host override makes only gpu002 need the mount. Node control: REST
#     (scontrol configured as /nonexistent/scontrol to prove it), then with
#     slurmrestd stopped, the fallback to the chroot's real /usr/bin/scontrol.
#  3. Slurm 24.11 again, gpuhc-drain and the storm guard: gpu001, gpu002 and
#     gpu003 fail different checks (a missing mount, a missing process, too
#     little memory: one [[host]] override each, added one node at a time)
#     with the storm guard at 2 nodes; gpu004 is drained by an admin. Two
#     drains happen, the third is suppressed and recorded; `gpuhc-drain
#     list` shows both drains with their detail, the suppressed node and
#     gpu004 as not gpuhc's; `gpuhc-drain resume gpu004` is refused; drain,
#     resume, history and stats run against the real cluster and the nodes'
#     event logs.
#  4. Slurm 24.11 again, a simulated GPU fault: every slurmd runs the health
#     check; gpu003's run simulates a DGX H100 with XID 79 injected on gpu3
#     (--simulate dgxh100 --inject gpu3:xid=79), gpu001's a healthy DGX H100.
#     gpu003 is drained through REST (scontrol is /nonexistent/scontrol) with
#     the XID reason, marked [simulated]; gpu001 stays idle.
#  5. Slurm 24.11 again, an InfiniBand fault: gpu001 and gpu003 each see a
#     DGX H100's sysfs (internal/sysfsfix's h100-ndr tree, 8 NDR HCAs and a
#     management port) bind-mounted over /sys in a private
#     mount namespace, so discovery goes through rdmamap's fixed
#     /sys/class/infiniband paths as on a real node; gpu003's mlx5_3 port 1
#     trains at 200 Gb/sec. --print-inventory on gpu001 gives the expected
#     values; gpu003 is drained through REST with the ib.port reason, gpu001
#     (same tree, healthy) and gpu002/gpu004 (no HCAs) stay idle.
#  6. Slurm 24.11 again, real kernel lines (test/e2e/kernlog.sh): each node
#     replays one line from the evidence corpus with --kernel-log on a
#     simulated DGX H100: XID 145 Nonfatal stays idle; XID 154 "Node Reboot
#     Required", a fatal NVSwitch SXid and a PCIe AER fatal error drain
#     through REST.
#  spank. The SPANK plugin on all three test beds (test/e2e/spank.sh):
#     --gpu-health=quick|full reaches gpuhc-prolog (its event log has the
#     job's mode), a bogus value is refused at submit time.
#  jobs. gpuhc-prolog and gpuhc-epilog as Prolog/Epilog with real jobs
#     (test/e2e/jobs.sh, on all three): healthy jobs and the prolog's cost, a prolog
#     fault that drains and requeues, an epilog fault, leftover processes,
#     an XID attributed to the job that was running.
#  hct. The HealthCheckTimeout scenario on 26.05 (test/e2e/hctimeout.sh,
#     where it exists).
#  quarantine. gpuhc-drain lemons --apply/--revert on 24.11 and 26.05
#     (test/e2e/quarantine.sh): a lemon's Weight (and a feature) raised in
#     slurmctld and brought back from the event log.
#  remediate. Remediation on 24.11 (test/e2e/remediate.sh): reset-gpu with a
#     stand-in nvidia-smi, two resets that do not cure escalating to rma
#     (gpuhc-drain rma), the daily and cluster budgets; then the reboot
#     loop: XID 79 drains, gpuhc asks scontrol reboot, the RebootProgram
#     (test/e2e/reboot.sh) restarts slurmd -b under a new boot id, the
#     post-boot runs resume the node, a waiting job starts only after.
#  faults. Fault injection on 26.05 (test/e2e/faults.sh, where it exists):
#     slurmrestd killed mid-drain, slurmctld stopped, the state directory
#     full and read-only, the clock stepped back, the event log's disk full.
#
# Prints PASS:/FAIL: lines and ends with "e2e: N passed, M failed"; exits 1
# if anything failed. Everything started is stopped by PID on exit.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
BIN=${GPUHC_BIN:-$REPO/bin/gpuhc-healthcheck}
DRAIN_BIN=${GPUHC_DRAIN_BIN:-$(dirname "$BIN")/gpuhc-drain}
# Installed-package mode (test/package/install-test.sh): scenario 1's slurmd
# runs GPUHC_BIN where it is (no copy), runs GPUHC_PROLOG/GPUHC_EPILOG as its
# Prolog/Epilog, and a job goes through them.
INSTALLED=${GPUHC_E2E_INSTALLED:-}
PROLOG=${GPUHC_PROLOG:-}
EPILOG=${GPUHC_EPILOG:-}
ONLY=${GPUHC_E2E_ONLY:-}
case $ONLY in
''|22|24|26|3|4|5|6|spank|jobs|hct|faults|remediate|quarantine) ;;
*) echo "e2e: GPUHC_E2E_ONLY=$ONLY: want 22, 24 (scenarios 2 to 6 and remediation on 24.11), 26 (every REST scenario on 26.05), 3, 4, 5, 6 (on both), spank, jobs, hct, faults, remediate or quarantine" >&2; exit 2 ;;
esac
# shellcheck source=testbed.sh
source "$HERE/testbed.sh"
# The job-boundary scenarios run gpuhc-prolog and gpuhc-epilog from the
# same directory as the health check.
GPUHC_BIN_DIR=${GPUHC_BIN_DIR:-$(dirname "$BIN")}
GPUHC_PROLOG_BIN=${GPUHC_PROLOG_BIN:-$GPUHC_BIN_DIR/gpuhc-prolog}
# shellcheck source=spank.sh
source "$HERE/spank.sh"
# shellcheck source=jobs.sh
source "$HERE/jobs.sh"
# shellcheck source=kernlog.sh
source "$HERE/kernlog.sh"
# shellcheck source=remediate.sh
source "$HERE/remediate.sh"
# The HealthCheckTimeout scenario (26.05), where that file exists.
if [[ -f $HERE/hctimeout.sh ]]; then
	# shellcheck source=/dev/null
	source "$HERE/hctimeout.sh"
fi
# The lemon quarantine scenario (24.11 and 26.05), where that file exists.
if [[ -f $HERE/quarantine.sh ]]; then
	# shellcheck source=/dev/null
	source "$HERE/quarantine.sh"
fi
# The fault-injection scenario (26.05), where that file exists.
if [[ -f $HERE/faults.sh ]]; then
	# shellcheck source=/dev/null
	source "$HERE/faults.sh"
fi

WAIT=${GPUHC_E2E_WAIT:-30}      # seconds allowed for a drain or a resume
QUIET_RUNS=3                    # health-check runs that must change nothing

e2e_asserts e2e

[[ $(id -u) == 0 ]] || { echo "e2e: must run as root" >&2; exit 2; }
e2e_lock "$(basename "$0")"

[[ -x $BIN ]] || { echo "e2e: $BIN missing; run make build" >&2; exit 2; }
"$BIN" --version >/dev/null || { echo "e2e: $BIN --version failed" >&2; exit 2; }

# ------------------------------------------------------------------ files

HC22=$E2E_DIR/hc22                  # scenario 1 files (host)
MNT22=$E2E_DIR/mnt22                # the required mount, scenario 1
# Scenarios 2 to 6 run in the chroot of one bed at a time (use_bed_run):
# X_IN is the path inside the chroot, X the same seen from the host.
HC2_IN=/srv/gpuhc-hc                # scenario 2 files
MNT2_IN=/srv/gpuhc-mnt              # the required mount of gpu002
HC3_IN=/srv/gpuhc-hc3               # scenario 3 files
EV3_IN=/var/log/gpuhc               # scenario 3 event logs, one per node
HC4_IN=/srv/gpuhc-hc4               # scenario 4 files
HC5_IN=/srv/gpuhc-hc5               # scenario 5 files
HC_TIMEOUT26=4                      # 26.05's HealthCheckTimeout, below the 5 s interval

# use_bed_run 24|26: use_bed, and the scenario paths in that chroot. OUT3
# (gpuhc-drain's output, quoted by docs/operations.md) is scenario3 for 24.11 and
# scenario3-26.05 for 26.05.
use_bed_run() {
	use_bed "$1"
	HC2=$BROOT$HC2_IN MNT2=$BROOT$MNT2_IN HC3=$BROOT$HC3_IN EV3=$BROOT$EV3_IN
	HC4=$BROOT$HC4_IN HC5=$BROOT$HC5_IN HC6=$BROOT$HC6_IN
	OUT3=$E2E_DIR/scenario3
	[[ $BV == 24 ]] || OUT3+=-$BL
	# What differs between the versions (verified on 24.11.5 and 26.05.5):
	# the HTTP status of a POST to an unknown node (error 2018 on both),
	# ping's `pinged` field, and whether RESUME keeps the drain's reason.
	case $BV in
	24) UNKNOWN_HTTP=500 PING_PINGED=1 RESUME_KEEPS=1 ;;
	26) UNKNOWN_HTTP=422 PING_PINGED= RESUME_KEEPS= ;;
	esac
}

# ran DIR...: a scenario ran on the current bed; on a failure dump_all
# prints that bed's daemon logs and the files in DIR...
declare -A RAN_BED=()
RAN_DIRS=()
ran() { RAN_BED[$BV]=1; RAN_DIRS+=("$@"); }
FIXTURE_H100=$REPO/internal/sysfsfix/testdata/h100-ndr

cleanup() {
	local rc=$?
	trap - EXIT
	set +e
	if ((rc != 0)); then
		fail "e2e aborted (exit status $rc) before all scenarios ran"
	fi
	if ((NFAIL > 0)); then dump_all; fi
	say "tearing down"
	down26 quiet
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
	for d in "${!RAN_BED[@]}"; do dump_logs_bed "$d" 2>&1; done
	dirs+=("${RAN_DIRS[@]}")
	if [[ -n ${RAN_SPANK22:-}${RAN_SPANK24:-}${RAN_SPANK26:-} ]]; then spank_dump 2>&1; fi
	if [[ -n ${RAN_JOBS:-} ]]; then jobs_dump 2>&1; fi
	for d in "${dirs[@]}"; do
		for f in "$d"/runs.*.log "$d"/log/* "$d"/*.jsonl "$d"/*.txt; do
			[[ -f $f ]] || continue
			echo "===== $f (last 60 lines)"; tail -60 "$f"
		done
	done
}

# ------------------------------------------------------------------ helpers

# show22/show24/show26 NODE: one line of `scontrol show node -o`; showb
# (testbed.sh) the same on the bed use_bed chose.
show22() { SLURM_CONF=$S22_CONF scontrol show node -o "$1" 2>&1; }
show24() { s24 scontrol show node -o "$1" 2>&1; }
show26() { s26 scontrol show node -o "$1" 2>&1; }

# hc_conf PROGRAM: the slurm.conf lines of a health-check scenario: every
# slurmd runs PROGRAM every 5 s. 26.05 wants HealthCheckTimeout below
# HealthCheckInterval (every daemon logs an error otherwise, verified on
# 26.05.5); a simulated gpuhc run takes well under a second.
hc_conf() {
	printf 'HealthCheckProgram=%s\nHealthCheckInterval=5\nHealthCheckNodeState=ANY\n' "$1"
	if [[ $BV == 26 ]]; then echo "HealthCheckTimeout=$HC_TIMEOUT26"; fi
}
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
# logged TIMEOUT PATTERN FILE: wait until a line of FILE matches PATTERN. A
# run prints its policy line only once its Slurm calls are done (the storm
# guard's recount waits out the second of the drain), after the node already
# shows the drain.
logged() { wait_for "$1" "'$2' in $3" grep -q "$2" "$3"; }
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

# hc_wrapper FILE BINARY CONFIG RUNDIR [EXPORTS [ARGS]]: the
# HealthCheckProgram. It does nothing until RUNDIR/armed exists, so the runs
# slurmd makes while the test bed is still coming up (22.05 runs it before
# registering) do not race the fixture setup. EXPORTS are shell lines run
# first; ARGS are added to the command line (unquoted, so EXPORTS may set a
# variable that ARGS names). The file is replaced atomically.
hc_wrapper() {
	cat >"$1.tmp" <<EOF
#!/bin/sh
# gpuhc e2e HealthCheckProgram: slurmd passes no arguments and only
# SLURMD_NODENAME in the environment.
[ -e $4/armed ] || exit 0
${5:-}
echo "=== run \$SLURMD_NODENAME" >>$4/runs.\$SLURMD_NODENAME.log
exec $2 --config $3${6:+ $6} >>$4/runs.\$SLURMD_NODENAME.log 2>&1
EOF
	chmod 0755 "$1.tmp"
	mv "$1.tmp" "$1"
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
storm_jitter = "0s"

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
	local hcbin=$HC22/gpuhc-healthcheck extra=
	[[ $INSTALLED == 1 ]] && hcbin=$BIN
	hc_wrapper "$HC22/healthcheck.sh" "$hcbin" "$HC22/gpuhc.toml" "$HC22" \
		"SLURM_CONF=$S22_CONF; export SLURM_CONF"
	expect "22.05: --check-config accepts the e2e config" \
		"$BIN" --check-config "$HC22/gpuhc.toml"
	[[ -n $PROLOG ]] && extra+=$'\n'"Prolog=$PROLOG"
	[[ -n $EPILOG ]] && extra+=$'\n'"Epilog=$EPILOG"

	GPUHC_S22_EXTRA="HealthCheckProgram=$HC22/healthcheck.sh
HealthCheckInterval=5
HealthCheckNodeState=ANY$extra" up22
	touch "$HC22/armed"
	say "22.05: HealthCheckProgram runs $hcbin${PROLOG:+, Prolog=$PROLOG}${EPILOG:+, Epilog=$EPILOG}"

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

	# a job, through the Prolog and Epilog when set
	if [[ -n $PROLOG || -n $EPILOG ]]; then
		local jout
		jout=$(SLURM_CONF=$S22_CONF timeout 60 srun -N1 -w "$node" -t 1 /bin/echo gpuhc-e2e-job 2>&1) || true
		expect "22.05: a job runs through Prolog/Epilog (srun printed: ${jout//$'\n'/ })" \
			grep -qx gpuhc-e2e-job <<<"$jout"
		expect "22.05: node back to idle after the job (Prolog/Epilog drained nothing)" \
			wait_node 20 show22 "$node" clean
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
# rest_get PATH / rest_post PATH BODY: slurmrestd's answer at
# /slurm/$BREST/PATH, then a line with the HTTP status.
rest_get() {
	curl -s --max-time 5 -w '\n%{http_code}' -H "X-SLURM-USER-TOKEN: $(cat "$BTOKEN")" \
		"http://127.0.0.1:$BREST_PORT/slurm/$BREST/$1"
}
rest_post() {
	curl -s --max-time 5 -w '\n%{http_code}' -H "X-SLURM-USER-TOKEN: $(cat "$BTOKEN")" \
		-H 'Content-Type: application/json' -d "$2" "http://127.0.0.1:$BREST_PORT/slurm/$BREST/$1"
}

# unknown_node_refused: a drain of a node slurmctld does not know answers
# UNKNOWN_HTTP with error 2018.
unknown_node_refused() {
	local out code body
	out=$(rest_post node/gpuhc-nosuch '{"state":["DRAIN"],"reason":"gpuhc e2e"}') || true
	code=${out##*$'\n'} body=${out%$'\n'*}
	WHY="HTTP $code: $(tr -d '\n ' <<<"$body" | head -c 300)"
	[[ $code == "$UNKNOWN_HTTP" ]] && jq -e '[.errors[].error_number] | index(2018) != null' <<<"$body" >/dev/null
}

# ping_shape: ping answers responding; `pinged` ("UP") only where
# PING_PINGED (v0.0.42 on 24.11; v0.0.45 has none).
ping_shape() {
	local out p
	out=$(rest_get ping/) || true
	p=$(jq -c '.pings[0]' <<<"${out%$'\n'*}" 2>/dev/null) || p="not JSON: ${out:0:200}"
	WHY="ping: $p"
	if [[ -n $PING_PINGED ]]; then
		jq -e '.responding == true and .pinged == "UP"' <<<"$p" >/dev/null 2>&1
	else
		jq -e '.responding == true and (has("pinged") | not)' <<<"$p" >/dev/null 2>&1
	fi
}

# resume_reason NODE PREFIX: after a RESUME the idle node keeps the old
# reason (24.11) or has none (26.05).
resume_reason() {
	local r
	r=$(reason_of "$(showb "$1")")
	WHY="reason '$r'"
	if [[ -n $RESUME_KEEPS ]]; then [[ -n $r && $r == "$2"* ]]; else [[ -z $r ]]; fi
}

# hc_timeout_quiet: 26.05 runs with HealthCheckTimeout=$HC_TIMEOUT26, and no
# daemon logged "HealthCheckTimeout (N) must be less than
# HealthCheckInterval (5)" (they do, on stderr and in their logs, without
# the line: verified on 26.05.5).
hc_timeout_quiet() {
	local cfg hits
	cfg=$(sb scontrol show config 2>&1 | grep '^HealthCheckTimeout') || true
	hits=$(grep -l 'must be less than HealthCheckInterval' "$E2E_DIR"/slurm*26*.out "$S26"/log/*.log 2>/dev/null) || true
	WHY="${cfg:-no HealthCheckTimeout in scontrol show config}; files with the error: ${hits:-none}"
	[[ $cfg =~ \ $HC_TIMEOUT26\ sec$ && -z $hits ]]
}

# remount2: gpu002's required mount is back.
remount2() {
	mount -t tmpfs -o size=8m gpuhc-e2e "$MNT2"
	say "$BL (2): mounted $MNT2_IN again"
}

scenario2() {
	say "scenario 2: Slurm $BL chroot, 4 nodes, HealthCheckProgram + REST, then scontrol"
	ran "$HC2"
	local prefix="gpuhc: host.mounts: $MNT2_IN:" n
	need_chroot "$BV"
	downb
	rm -rf --one-file-system "$HC2"
	mkdir -p "$HC2"/{state,log} "$MNT2"
	install -m 0755 "$BIN" "$HC2/gpuhc-healthcheck"
	hc_wrapper "$HC2/healthcheck.sh" "$HC2_IN/gpuhc-healthcheck" "$HC2_IN/gpuhc.toml" "$HC2_IN"
	write_conf_2 "/nonexistent/scontrol"

	upb "$(hc_conf "$HC2_IN/healthcheck.sh")"
	mount -t tmpfs -o size=8m gpuhc-e2e "$MNT2"
	touch "$HC2/armed"
	expect "$BL (2): --check-config accepts the e2e config (in the chroot)" \
		sb "$HC2_IN/gpuhc-healthcheck" --check-config "$HC2_IN/gpuhc.toml"
	expect "$BL (2): slurmrestd $BREST answers a drain of an unknown node with HTTP $UNKNOWN_HTTP, error 2018" \
		unknown_node_refused
	expect "$BL (2): ping $BREST answers responding$([[ -n $PING_PINGED ]] && echo ', pinged UP' || echo ', with no pinged field')" \
		ping_shape

	wait_runs "$HC2" gpu002 1 || true
	umount "$MNT2"
	say "$BL (2): unmounted $MNT2_IN (needed by gpu002 only)"
	expect "$BL (2): gpu002 drained through REST (scontrol=/nonexistent) within ${WAIT}s, reason set by 'slurm'" \
		wait_node "$WAIT" showb gpu002 drained "$prefix" slurm
	WHY="$(last_policy "$HC2" gpu002)"
	expect "$BL (2): the drain went through slurmrestd" \
		logged 10 "^policy: drained.*via rest $BREST" "$HC2/runs.gpu002.log"
	local others=ok
	for n in gpu001 gpu003 gpu004; do
		node_is showb "$n" clean || others="$n: $WHY"
	done
	WHY=$others
	expect "$BL (2): gpu001, gpu003, gpu004 stay idle" [ "$others" = ok ]

	remount2
	expect "$BL (2): gpu002 resumed within ${WAIT}s" \
		wait_node "$WAIT" showb gpu002 clean
	WHY="$(grep '^policy: resumed' "$HC2/runs.gpu002.log" | tail -1)" || true
	expect "$BL (2): the resume went through slurmrestd" \
		logged 10 "^policy: resumed.*via rest $BREST" "$HC2/runs.gpu002.log"
	expect "$BL (2): after the RESUME gpu002's reason is $([[ -n $RESUME_KEEPS ]] && echo "kept ('$prefix …')" || echo cleared)" \
		resume_reason gpu002 "$prefix"

	# slurmrestd down: auto falls back to the chroot's real scontrol
	stop "slurmrestd$BV"
	write_conf_2 "/usr/bin/scontrol"
	wait_runs "$HC2" gpu002 1 || true
	umount "$MNT2"
	say "$BL (2): stopped slurmrestd, scontrol=/usr/bin/scontrol, unmounted $MNT2_IN"
	expect "$BL (2): without slurmrestd gpu002 is drained through scontrol within ${WAIT}s (reason set by root)" \
		wait_node "$WAIT" showb gpu002 drained "$prefix" root
	remount2
	expect "$BL (2): without slurmrestd gpu002 is resumed within ${WAIT}s" \
		wait_node "$WAIT" showb gpu002 clean
	WHY="$(grep '^policy: ' "$HC2/runs.gpu002.log" | tail -4 | tr '\n' '|')" || true
	expect "$BL (2): without slurmrestd the drain and resume went through scontrol" \
		eval "grep '^policy: drained' '$HC2/runs.gpu002.log' | tail -1 | grep -q 'via scontrol' &&
		      grep '^policy: resumed' '$HC2/runs.gpu002.log' | tail -1 | grep -q 'via scontrol'"
	if [[ $BV == 26 ]]; then
		expect "$BL (2): HealthCheckTimeout=$HC_TIMEOUT26 is in force and no daemon logged 'must be less than HealthCheckInterval'" \
			hc_timeout_quiet
	fi

	downb
}

# conf_head DIR_IN TITLE [SCONTROL]: the head of a 24.11 scenario's
# gpuhc.toml: files under DIR_IN (as the chroot sees it), node control
# through REST with SCONTROL as the fallback (default: none, REST only),
# thermal off (the VM has no sensors).
conf_head() {
	cat <<EOF
# gpuhc e2e, $2
state_dir = "$1/state/%n"
lock_file = "$1/state/%n.lock"
deadline = "$BDEADLINE"
check_timeout = "$BCHECK_TIMEOUT"

[log]
level = "debug"
file = "$1/log/%n.jsonl"

[events]
file = "$1/log/%n.events.jsonl"

[policy]
resume_after = 2
storm_jitter = "0s"

[slurm]
backend = "auto"
url = "http://127.0.0.1:$BREST_PORT"
token_file = "$BTOKEN_IN"
user = "slurm"
scontrol = "${3:-/nonexistent/scontrol}"
timeout = "$BSLURM_TIMEOUT"
retries = 1

[checks.thermal]
enabled = false
EOF
}

# write_conf_2 SCONTROL: the chroot config (REST url + token, scontrol path)
write_conf_2() {
	{
		conf_head "$HC2_IN" "scenario 2 (Slurm $BL chroot)" "$1"
		cat <<EOF

[[host]]
match = "gpu002"
[[host.checks.mounts.mount]]
path = "$MNT2_IN"
fstype = "tmpfs"
writable = true
EOF
	} >"$HC2/gpuhc.toml.tmp"
	mv "$HC2/gpuhc.toml.tmp" "$HC2/gpuhc.toml"
}

# ================================================================== scenario 3
# gpuhc-drain against the 24.11 test bed, with the storm guard at 2 nodes.
# Each faulty node gets one [[host]] override; they are added one node at a
# time, so the order of the drains (and so which one is suppressed) is fixed.
FAULT3_gpu001='[[host.checks.mounts.mount]]
path = "/srv/gpuhc-e2e-absent"'
FAULT3_gpu002='[host.checks.processes]
required = ["gpuhc-e2e-absent"]'
FAULT3_gpu003='[host.checks.memory]
min_total = "64TiB"'

# write_conf_3 NODE...: the scenario 3 config; each NODE gets its fault.
write_conf_3() {
	local n v
	{
		cat <<EOF
# gpuhc e2e, scenario 3 (Slurm $BL chroot, gpuhc-drain, storm guard)
state_dir = "$HC3_IN/state/%n"
lock_file = "$HC3_IN/state/%n.lock"
deadline = "$BDEADLINE"
check_timeout = "$BCHECK_TIMEOUT"

[log]
level = "debug"
file = "$HC3_IN/log/%n.jsonl"

[events]
file = "$EV3_IN/%n.jsonl"

[policy]
resume_after = 2
storm_jitter = "0s"
max_drained_nodes = 2
max_drained_fraction = 0

[slurm]
backend = "auto"
url = "http://127.0.0.1:$BREST_PORT"
token_file = "$BTOKEN_IN"
user = "slurm"
scontrol = "/usr/bin/scontrol"
timeout = "$BSLURM_TIMEOUT"
retries = 1

[checks.thermal]
enabled = false
EOF
		for n in "$@"; do
			v=FAULT3_$n
			printf '\n[[host]]\nmatch = "%s"\n%s\n' "$n" "${!v}"
		done
	} >"$HC3/gpuhc.toml.tmp"
	mv "$HC3/gpuhc.toml.tmp" "$HC3/gpuhc.toml"
}

# drainctl ARGS...: gpuhc-drain in the chroot with the scenario 3 config
drainctl() { sb "$HC3_IN/gpuhc-drain" "$@" --config "$HC3_IN/gpuhc.toml"; }

# list_has NODE JQ: `gpuhc-drain list --json` has exactly one row for NODE,
# and it matches JQ
list_has() {
	WHY="$(jq -c --arg n "$1" '.[] | select(.node == $n)' "$OUT3/list.json" 2>&1 | head -c 600)"
	jq -e --arg n "$1" "[.[] | select(.node == \$n) | $2] == [true]" "$OUT3/list.json" >/dev/null
}

# event_has NODE JQ: NODE's event log has an event matching JQ
event_has() {
	WHY="$(tail -3 "$EV3/$1.jsonl" 2>&1 | head -c 600)"
	jq -e -s "[.[] | select($2)] | length > 0" "$EV3/$1.jsonl" >/dev/null 2>&1
}

# wait_event TIMEOUT NODE JQ
wait_event() {
	local end=$((SECONDS + $1))
	until event_has "$2" "$3"; do
		((SECONDS < end)) || return 1
		sleep 0.5
	done
}

scenario3() {
	say "scenario 3: Slurm $BL chroot, gpuhc-drain list/drain/resume/history/stats, storm guard at 2 nodes"
	ran "$HC3" "$EV3" "$OUT3"
	local n rc
	[[ -x $DRAIN_BIN ]] || { fail "$BL (3): $DRAIN_BIN missing; run make build"; return; }
	need_chroot "$BV"
	downb
	rm -rf --one-file-system "$HC3" "$EV3" "$OUT3"
	mkdir -p "$HC3"/{state,log} "$OUT3"
	install -m 0755 "$BIN" "$HC3/gpuhc-healthcheck"
	install -m 0755 "$DRAIN_BIN" "$HC3/gpuhc-drain"
	hc_wrapper "$HC3/healthcheck.sh" "$HC3_IN/gpuhc-healthcheck" "$HC3_IN/gpuhc.toml" "$HC3_IN"
	write_conf_3

	upb "$(hc_conf "$HC3_IN/healthcheck.sh")"
	touch "$HC3/armed"
	expect "$BL (3): --check-config accepts the scenario 3 config" \
		sb "$HC3_IN/gpuhc-healthcheck" --check-config "$HC3_IN/gpuhc.toml"
	expect "$BL (3): gpuhc-drain --version runs in the chroot (static binary)" sb "$HC3_IN/gpuhc-drain" --version

	sb scontrol update NodeName=gpu004 State=DRAIN Reason="maintenance"
	say "$BL (3): admin drained gpu004 ('maintenance')"
	wait_runs "$HC3" gpu001 1 || true

	write_conf_3 gpu001
	say "$BL (3): gpu001 needs a missing mount"
	expect "$BL (3): gpu001 drained by its health check (host.mounts) within ${WAIT}s" \
		wait_node "$WAIT" showb gpu001 drained "gpuhc: host.mounts: /srv/gpuhc-e2e-absent:"
	write_conf_3 gpu001 gpu002
	say "$BL (3): gpu002 needs a missing process"
	expect "$BL (3): gpu002 drained by its health check (host.processes) within ${WAIT}s" \
		wait_node "$WAIT" showb gpu002 drained "gpuhc: host.processes: gpuhc-e2e-absent:"
	write_conf_3 gpu001 gpu002 gpu003
	say "$BL (3): gpu003 needs 64 TiB of memory"
	expect "$BL (3): the storm guard (2 nodes) suppresses gpu003's drain and records a drain-suppressed event within ${WAIT}s" \
		wait_event "$WAIT" gpu003 '.kind == "drain-suppressed" and (.message | test("not draining: gpuhc: host.memory: host: MemTotal .* < min 64 TiB"))'
	expect "$BL (3): gpu003 stays undrained over 2 more runs" stays showb gpu003 "$HC3" 2 clean
	WHY="$(last_policy "$HC3" gpu003)"
	expect "$BL (3): gpu003's run reports the suppression" grep -q '^policy: drain-suppressed' <<<"$WHY"

	rc=0; drainctl list --events "$EV3_IN/" >"$OUT3/list.txt" 2>"$OUT3/list.err" || rc=$?
	WHY="exit $rc: $(cat "$OUT3/list.err")"
	expect "$BL (3): gpuhc-drain list --events $EV3_IN/ exits 0" [ "$rc" = 0 ]
	say "$BL (3): gpuhc-drain list:"; cat "$OUT3/list.txt"
	drainctl list --json --events "$EV3_IN/" >"$OUT3/list.json" 2>>"$OUT3/list.err" || true
	expect "$BL (3): list shows gpu001's drain with its detail (host.mounts, component, action, by the health check)" \
		list_has gpu001 '.owner == "gpuhc" and .check == "host.mounts" and .component == "/srv/gpuhc-e2e-absent" and .message == "not mounted" and .action == "drain" and .by == "healthcheck" and .status == "FAIL" and .duration_seconds >= 0'
	expect "$BL (3): list shows gpu002's drain with its detail (host.processes)" \
		list_has gpu002 '.owner == "gpuhc" and .check == "host.processes" and .component == "gpuhc-e2e-absent" and .message == "not running" and .by == "healthcheck"'
	expect "$BL (3): list shows gpu003 as suppressed by the storm guard (host.memory)" \
		list_has gpu003 '.owner == "gpuhc, suppressed" and .suppressed and .check == "host.memory" and .component == "host" and (.message | test("not draining"))'
	expect "$BL (3): list shows gpu004's admin drain as not gpuhc's (reason, set by root)" \
		list_has gpu004 '.owner == "not gpuhc" and (.gpuhc | not) and .reason == "maintenance" and .reason_user == "root"'
	WHY="$(cat "$OUT3/list.txt")"
	expect "$BL (3): the list table marks gpu004 'not gpuhc'" grep -q '^gpu004 .*not gpuhc.*maintenance' "$OUT3/list.txt"
	drainctl list --csv --events "$EV3_IN/" >"$OUT3/list.csv" 2>>"$OUT3/list.err" || true
	WHY="$(cat "$OUT3/list.csv")"
	expect "$BL (3): list --csv has a header and 4 rows" [ "$(wc -l <"$OUT3/list.csv")" = 5 ]

	rc=0; drainctl resume gpu004 >"$OUT3/resume-refused.txt" 2>&1 || rc=$?
	WHY="exit $rc: $(cat "$OUT3/resume-refused.txt")"
	expect "$BL (3): gpuhc-drain resume gpu004 (an admin's drain) is refused without --force (exit 1)" [ "$rc" = 1 ]
	expect "$BL (3): gpu004 is still drained for 'maintenance'" node_is showb gpu004 drained "maintenance" root

	rc=0; drainctl stats --events "$EV3_IN/" >"$OUT3/stats-early.txt" 2>&1 || rc=$?
	WHY="exit $rc: $(cat "$OUT3/stats-early.txt")"
	expect "$BL (3): gpuhc-drain stats --events $EV3_IN/ runs" [ "$rc" = 0 ]

	# The faults go: the health checks resume their own drains.
	write_conf_3
	say "$BL (3): faults removed"
	expect "$BL (3): gpu001 and gpu002 resumed by their health checks within ${WAIT}s" \
		eval 'wait_node "$WAIT" showb gpu001 clean && wait_node "$WAIT" showb gpu002 clean'

	rc=0; drainctl drain gpu003 --reason "admin: gpu3: GPU swap, ticket 42" >"$OUT3/drain.txt" 2>&1 || rc=$?
	WHY="exit $rc: $(cat "$OUT3/drain.txt")"
	expect "$BL (3): gpuhc-drain drain gpu003 sets 'gpuhc: admin: gpu3: …'" \
		eval '[ "$rc" = 0 ] && node_is showb gpu003 drained "gpuhc: admin: gpu3: GPU swap, ticket 42"'
	expect "$BL (3): the drain is recorded in gpu003's log, by gpuhc-drain:<user>" \
		event_has gpu003 '.kind == "drain" and .message == "gpuhc: admin: gpu3: GPU swap, ticket 42" and (.by | startswith("gpuhc-drain:"))'
	drainctl list --json gpu003 >"$OUT3/list-gpu003.json" 2>/dev/null || true
	WHY="$(cat "$OUT3/list-gpu003.json")"
	expect "$BL (3): list (event logs found from events.file) attributes gpu003's drain to gpuhc-drain" \
		jq -e '.[0].owner == "gpuhc" and (.[0].by | startswith("gpuhc-drain:"))' "$OUT3/list-gpu003.json"
	wait_runs "$HC3" gpu003 2 || true
	expect "$BL (3): gpu003's health check leaves gpuhc-drain's drain alone" \
		node_is showb gpu003 drained "gpuhc: admin: gpu3: GPU swap, ticket 42"
	rc=0; drainctl resume gpu003 >"$OUT3/resume.txt" 2>&1 || rc=$?
	WHY="exit $rc: $(cat "$OUT3/resume.txt")"
	expect "$BL (3): gpuhc-drain resume gpu003 resumes it and records the resume" \
		eval '[ "$rc" = 0 ] && wait_node 10 showb gpu003 clean && event_has gpu003 ".kind == \"resume\" and (.by | startswith(\"gpuhc-drain:\"))"'
	rc=0; drainctl resume --force gpu004 >"$OUT3/resume-force.txt" 2>&1 || rc=$?
	WHY="exit $rc: $(cat "$OUT3/resume-force.txt")"
	expect "$BL (3): gpuhc-drain resume --force gpu004 resumes the admin's drain" \
		eval '[ "$rc" = 0 ] && wait_node 10 showb gpu004 clean'

	rc=0; drainctl history --events "$EV3_IN/" >"$OUT3/history.txt" 2>&1 || rc=$?
	WHY="exit $rc: $(tail -5 "$OUT3/history.txt")"
	expect "$BL (3): gpuhc-drain history shows the drains, the suppression and the 4 resumes" \
		eval '[ "$rc" = 0 ] && grep -q " drain-suppressed " "$OUT3/history.txt" && [ "$(grep -c " resume " "$OUT3/history.txt")" -ge 4 ]'
	rc=0; drainctl stats --events "$EV3_IN/" >"$OUT3/stats.txt" 2>&1 || rc=$?
	WHY="exit $rc: $(cat "$OUT3/stats.txt")"
	expect "$BL (3): gpuhc-drain stats runs after the resumes" [ "$rc" = 0 ]
	say "$BL (3): gpuhc-drain stats:"; cat "$OUT3/stats.txt"
	drainctl stats --json --events "$EV3_IN/" >"$OUT3/stats.json" 2>&1 || true
	say "$BL (3): gpuhc-drain output kept in $OUT3"

	for n in "${BNODES[@]}"; do
		sb scontrol update NodeName="$n" State=RESUME >/dev/null 2>&1 || true
	done
	downb
}

# ================================================================== scenario 4
# A simulated GPU fault on the 24.11 test bed. The wrapper picks the
# simulation by node: gpu003 a DGX H100 with XID 79 on gpu3, gpu001 a
# healthy DGX H100; gpu002 and gpu004 run without --simulate. The XID check
# keeps the failure for the rest of the simulated boot, so gpu003 is not
# resumed while the fault is injected; the test bed is torn down instead.
SIM4_ARGS='case $SLURMD_NODENAME in
gpu001) SIM="--simulate dgxh100" ;;
gpu003) SIM="--simulate dgxh100 --inject gpu3:xid=79" ;;
*) SIM= ;;
esac'
REASON4='gpuhc: gpu.xid: gpu3 (SN 1654922000003, 0000:5d:00.0): XID 79 GPU has fallen off the bus [simulated]'


write_conf_4() {
	conf_head "$HC4_IN" "scenario 4 (Slurm $BL chroot, simulated GPU fault, REST only)" >"$HC4/gpuhc.toml.tmp"
	mv "$HC4/gpuhc.toml.tmp" "$HC4/gpuhc.toml"
}

# rest_node NODE: slurmrestd's view of NODE (v0.0.42), as JSON
rest_node() {
	curl -sf --max-time 5 -H "X-SLURM-USER-TOKEN: $(cat "$BTOKEN")" \
		"http://127.0.0.1:$BREST_PORT/slurm/v0.0.42/node/$1"
}

# drain_watch REASON TIMEOUT: wait for gpu003's drain with REASON (set by
# 'slurm'), checking on every poll that gpu001 is still idle and not
# drained; what gpu001 did instead is left in GPU001_CHANGED.
drain_watch() {
	local reason=$1 end=$((SECONDS + $2)) w
	GPU001_CHANGED=
	until node_is showb gpu003 drained "$reason" slurm; do
		w=$WHY
		node_is showb gpu001 clean || { WHY="gpu001 changed while waiting: $WHY"; GPU001_CHANGED=$WHY; return 1; }
		((SECONDS < end)) || { WHY=$w; return 1; }
		sleep 0.5
	done
	node_is showb gpu001 clean || GPU001_CHANGED="gpu001: $WHY"
	return 0
}

scenario4() {
	say "scenario 4: Slurm $BL chroot, --simulate dgxh100 --inject gpu3:xid=79 on gpu003, healthy simulation on gpu001, REST only"
	ran "$HC4"
	local line r n others
	need_chroot "$BV"
	downb
	rm -rf --one-file-system "$HC4"
	mkdir -p "$HC4"/{state,log}
	install -m 0755 "$BIN" "$HC4/gpuhc-healthcheck"
	hc_wrapper "$HC4/healthcheck.sh" "$HC4_IN/gpuhc-healthcheck" "$HC4_IN/gpuhc.toml" "$HC4_IN" \
		"$SIM4_ARGS" '$SIM'
	write_conf_4

	upb "$(hc_conf "$HC4_IN/healthcheck.sh")"
	expect "$BL (4): --check-config accepts the scenario 4 config (in the chroot)" \
		sb "$HC4_IN/gpuhc-healthcheck" --check-config "$HC4_IN/gpuhc.toml"
	WHY="$(sb "$HC4_IN/gpuhc-healthcheck" --version 2>&1)"
	expect "$BL (4): the cgo (dynamically linked) health check runs in the chroot" \
		sb "$HC4_IN/gpuhc-healthcheck" --version
	touch "$HC4/armed"
	say "$BL (4): armed: gpu003 runs --simulate dgxh100 --inject gpu3:xid=79, gpu001 --simulate dgxh100"

	expect "$BL (4): gpu003 drained through REST (scontrol=/nonexistent) within ${WAIT}s, reason set by 'slurm'" \
		drain_watch "$REASON4" "$WAIT"
	line=$(showb gpu003); r=$(reason_of "$line")
	WHY="reason '$r'"
	expect "$BL (4): gpu003's reason is exactly '$REASON4'" [ "$r" = "$REASON4" ]
	r=$(rest_node gpu003 | jq -c '.nodes[0] | {reason, reason_set_by_user, state}' 2>&1) || true
	WHY=$r
	expect "$BL (4): slurmrestd shows gpu003 drained with the same reason, set by 'slurm'" \
		jq -e --arg r "$REASON4" '.reason == $r and .reason_set_by_user == "slurm" and (.state | tostring | contains("DRAIN"))' <<<"$r"
	WHY="$(last_policy "$HC4" gpu003)"
	expect "$BL (4): gpu003's drain went through slurmrestd" \
		logged 10 "^policy: drained.*via rest $BREST" "$HC4/runs.gpu003.log"
	WHY="$(grep -m1 '^SIMULATED' "$HC4/runs.gpu003.log" 2>&1)"
	expect "$BL (4): gpu003's run says it is simulated (SIMULATED dgxh100: …)" \
		grep -q '^SIMULATED dgxh100: ' "$HC4/runs.gpu003.log"
	WHY="$(tail -3 "$HC4/log/gpu003.events.jsonl" 2>&1 | head -c 600)"
	expect "$BL (4): gpu003's event log has the drain (by the health check, via REST) with the '[simulated]' reason" \
		jq -e -s --arg r "$REASON4" '[.[] | select(.kind == "drain" and .message == $r and .by == "healthcheck" and (.backend // "" | startswith("rest")))] | length == 1' \
		"$HC4/log/gpu003.events.jsonl"
	expect "$BL (4): gpu003's event log has the gpu.xid FAIL transition of gpu3 (SN 1654922000003), marked '[simulated]'" \
		jq -e -s '[.[] | select(.kind == "transition" and .check == "gpu.xid" and .component == "gpu3" and .serial == "1654922000003" and .status == "FAIL" and (.message | endswith("[simulated]")))] | length > 0' \
		"$HC4/log/gpu003.events.jsonl"

	WHY=$GPU001_CHANGED
	expect "$BL (4): gpu001 (healthy simulated DGX H100) stayed idle while gpu003 was drained" [ -z "$GPU001_CHANGED" ]
	expect "$BL (4): gpu001 stays idle over 2 more runs" stays showb gpu001 "$HC4" 2 clean
	WHY="$(grep -m1 '^SIMULATED' "$HC4/runs.gpu001.log" 2>&1); last: $(last_policy "$HC4" gpu001)"
	expect "$BL (4): gpu001's runs are simulated and healthy (policy: none, 0 Slurm calls)" \
		eval 'grep -q "^SIMULATED dgxh100: " "$HC4/runs.gpu001.log" && last_policy "$HC4" gpu001 | grep -q "^policy: none \[0 Slurm calls\]" && ! grep -q "^policy: drain" "$HC4/runs.gpu001.log"'
	others=ok
	for n in gpu002 gpu004; do
		node_is showb "$n" clean || others="$n: $WHY"
	done
	WHY=$others
	expect "$BL (4): gpu002 and gpu004 (no simulation) stay idle" [ "$others" = ok ]
	expect "$BL (4): with XID 79 still injected gpu003 stays drained over 2 more runs (no resume)" \
		stays showb gpu003 "$HC4" 2 drained "$REASON4" slurm

	rm -f "$HC4/armed"
	for n in "${BNODES[@]}"; do
		sb scontrol update NodeName="$n" State=RESUME >/dev/null 2>&1 || true
	done
	downb
}

# ================================================================== scenario 5
# An InfiniBand fault on the 24.11 test bed. ibns.sh runs the health check
# in a private mount namespace with a node's fixture tree (if it has one)
# bind-mounted over /sys: the checks read it at root
# "/", as on a real node, and rdmamap discovers the HCAs through its fixed
# /sys/class/infiniband paths. gpu001 and gpu003 simulate DGX H100 GPUs
# whose PCI addresses match the tree, so ib.gdr and topology judge GPUs and
# HCAs together. The VM runs no Fabric Manager, so fabric.manager is off.
REASON5='gpuhc: ib.port: mlx5_3/1 (0000:5e:00.0): rate 200 Gb/sec < expected 400'
SIM5_ARGS='case $SLURMD_NODENAME in
gpu001|gpu003) SIM="--simulate dgxh100" ;;
*) SIM= ;;
esac'

write_ibns5() {
	cat >"$HC5/ibns.sh.tmp" <<EOF
#!/bin/sh
# gpuhc e2e: gpuhc-healthcheck with this node's sysfs fixture, if any, in
# a private mount namespace (nothing outside this process sees it).
fx=$HC5_IN/fixture/\$SLURMD_NODENAME
[ -d "\$fx/sys" ] || exec $HC5_IN/gpuhc-healthcheck "\$@"
# In a chroot / is no mount point, so unshare cannot make it private; /sys
# is made private instead, before anything is bound. The tree's
# sys/module/<name> entries say which modules are loaded (this VM's kernel
# has no /proc/modules to bind over).
exec /usr/bin/unshare -m --propagation unchanged /bin/sh -c \\
	'/bin/mount --make-rprivate /sys && /bin/mount --bind "\$0/sys" /sys && exec "\$@"' \\
	"\$fx" $HC5_IN/gpuhc-healthcheck "\$@"
EOF
	chmod 0755 "$HC5/ibns.sh.tmp"
	mv "$HC5/ibns.sh.tmp" "$HC5/ibns.sh"
}

write_conf_5() {
	{
		conf_head "$HC5_IN" "scenario 5 (Slurm $BL chroot, InfiniBand fault, REST only)"
		cat <<EOF

[checks.fabric.manager]
enabled = false

[checks.ib]
exclude = ["mlx5_8"]

# The DGX H100 nodes, with the values --print-inventory gave on gpu001.
[[host]]
match = "gpu[001,003]"
[host.checks.gpu.count]
expected = 8
EOF
		cat "$HC5/inventory.ib"
	} >"$HC5/gpuhc.toml.tmp"
	mv "$HC5/gpuhc.toml.tmp" "$HC5/gpuhc.toml"
}

scenario5() {
	say "scenario 5: Slurm $BL chroot, sysfs of a DGX H100 on gpu001/gpu003, mlx5_3/1 at 200 Gb/sec on gpu003, REST only"
	ran "$HC5"
	local n others
	need_chroot "$BV"
	downb
	rm -rf --one-file-system "$HC5"
	mkdir -p "$HC5"/{state,log,fixture}
	for n in gpu001 gpu003; do cp -a "$FIXTURE_H100" "$HC5/fixture/$n"; done
	printf '200 Gb/sec (4X HDR)\n' >"$HC5/fixture/gpu003/sys/class/infiniband/mlx5_3/ports/1/rate"
	install -m 0755 "$BIN" "$HC5/gpuhc-healthcheck"
	write_ibns5
	: >"$HC5/inventory.ib"
	write_conf_5

	hc_wrapper "$HC5/healthcheck.sh" "$HC5_IN/ibns.sh" "$HC5_IN/gpuhc.toml" "$HC5_IN" \
		"$SIM5_ARGS" '$SIM'
	upb "$(hc_conf "$HC5_IN/healthcheck.sh")"

	# Bring-up: the inventory of the healthy node, through the same
	# namespace and discovery path, becomes gpu001's and gpu003's config
	# (the wrapper does nothing until armed, and the config is re-read by
	# every run).
	SLURMD_NODENAME=gpu001 sb "$HC5_IN/ibns.sh" --config "$HC5_IN/gpuhc.toml" --node gpu001 \
		--simulate dgxh100 --print-inventory >"$HC5/inventory.txt" 2>&1 || true
	WHY=$(head -c 600 "$HC5/inventory.txt")
	expect "$BL (5): --print-inventory on gpu001 (rdmamap, fixture over /sys) pins 8 HCAs at 400 Gb/sec, InfiniBand, and gpu3's pair mlx5_3" \
		eval 'grep -qx "expected_hcas = 8" "$HC5/inventory.txt" && grep -qx "min_rate_gbps = 400.0" "$HC5/inventory.txt" && grep -qx "link_layer = \"InfiniBand\"" "$HC5/inventory.txt" && grep -q "\"0000:5d:00.0=mlx5_3\"" "$HC5/inventory.txt"'
	# Its [checks.ib.port] and [checks.topology] tables, under [[host]].
	sed -n '/^\[checks.ib.port\]/,$p' "$HC5/inventory.txt" | sed 's/^\[checks\./[host.checks./' >"$HC5/inventory.ib"
	write_conf_5
	expect "$BL (5): --check-config accepts the scenario 5 config with the inventory in a [[host]] section" \
		sb "$HC5_IN/gpuhc-healthcheck" --check-config "$HC5_IN/gpuhc.toml"
	touch "$HC5/armed"
	say "$BL (5): armed: gpu001 and gpu003 run with the h100-ndr tree over /sys (gpu003: mlx5_3/1 at 200 Gb/sec)"

	expect "$BL (5): gpu003 drained through REST (scontrol=/nonexistent) within ${WAIT}s with '$REASON5'" \
		drain_watch "$REASON5" "$WAIT"
	WHY="$(last_policy "$HC5" gpu003)"
	expect "$BL (5): gpu003's drain went through slurmrestd" \
		logged 10 "^policy: drained.*via rest $BREST" "$HC5/runs.gpu003.log"
	WHY="$(grep -m3 '^ib\.' "$HC5/runs.gpu003.log" 2>&1 || true)"
	expect "$BL (5): gpu003's run judged the HCAs rdmamap found (mlx5_0/1 OK, mlx5_3/1 FAIL), not the excluded mlx5_8" \
		eval 'grep -Eq "^ib\.port +mlx5_0/1 +OK" "$HC5/runs.gpu003.log" && grep -Eq "^ib\.port +mlx5_3/1 +FAIL +rate 200 Gb/sec < expected 400" "$HC5/runs.gpu003.log" && ! grep -Eq "^ib\.port +mlx5_8" "$HC5/runs.gpu003.log"'
	WHY="$(tail -3 "$HC5/log/gpu003.events.jsonl" 2>&1 | head -c 600)"
	expect "$BL (5): gpu003's event log has the drain (via REST) and the ib.port FAIL transition of mlx5_3/1" \
		eval 'jq -e -s --arg r "$REASON5" "[.[] | select(.kind == \"drain\" and .message == \$r and (.backend // \"\" | startswith(\"rest\")))] | length == 1" "$HC5/log/gpu003.events.jsonl" >/dev/null && jq -e -s "[.[] | select(.kind == \"transition\" and .check == \"ib.port\" and .component == \"mlx5_3/1\" and .status == \"FAIL\")] | length == 1" "$HC5/log/gpu003.events.jsonl" >/dev/null'

	WHY=$GPU001_CHANGED
	expect "$BL (5): gpu001 (the same tree, healthy) stayed idle while gpu003 was drained" [ -z "$GPU001_CHANGED" ]
	expect "$BL (5): gpu001 stays idle over 2 more runs" stays showb gpu001 "$HC5" 2 clean
	WHY="$({ grep -E '^(ib\.|topology)' "$HC5/runs.gpu001.log" | grep -v ' OK ' | head -5; } || true; last_policy "$HC5" gpu001)"
	expect "$BL (5): gpu001's ib.port, ib.counters, ib.gdr and topology results are all OK (policy: none, 0 Slurm calls)" \
		eval '! grep -E "^(ib\.|topology)" "$HC5/runs.gpu001.log" | grep -Ev " OK " | grep -q . && grep -Eq "^ib\.gdr +host +OK" "$HC5/runs.gpu001.log" && grep -Eq "^topology +gpu3 +OK" "$HC5/runs.gpu001.log" && last_policy "$HC5" gpu001 | grep -q "^policy: none \[0 Slurm calls\]"'
	others=ok
	for n in gpu002 gpu004; do
		node_is showb "$n" clean || others="$n: $WHY"
		grep -Eq '^ib\.port +host +SKIP' "$HC5/runs.$n.log" || others="$n: ib.port did not SKIP: $(grep -m1 '^ib\.port' "$HC5/runs.$n.log" || true)"
	done
	WHY=$others
	expect "$BL (5): gpu002 and gpu004 (no HCAs) stay idle and SKIP the IB checks" [ "$others" = ok ]
	WHY="$(grep -F "$HC5_IN" /proc/mounts || true)"
	expect "$BL (5): the fixture was mounted only inside the health check's namespace" [ -z "$WHY" ]

	rm -f "$HC5/armed"
	for n in "${BNODES[@]}"; do
		sb scontrol update NodeName="$n" State=RESUME >/dev/null 2>&1 || true
	done
	downb
}

# ================================================================== main
say "binary: $("$BIN" --version)"
case $ONLY in '' | 22) scenario22 ;; esac
# rest_scenarios 24|26: scenarios 2 to 6 on that bed, as GPUHC_E2E_ONLY says.
rest_scenarios() {
	use_bed_run "$1"
	case $ONLY in '' | 24 | 26) scenario2 ;; esac
	case $ONLY in '' | 24 | 26 | 3) scenario3 ;; esac
	case $ONLY in '' | 24 | 26 | 4) scenario4 ;; esac
	case $ONLY in '' | 24 | 26 | 5) scenario5 ;; esac
	case $ONLY in '' | 24 | 26 | 6) scenario6 ;; esac
}
case $ONLY in '' | 24 | 3 | 4 | 5 | 6) rest_scenarios 24 ;; esac
case $ONLY in '' | 26 | 3 | 4 | 5 | 6) rest_scenarios 26 ;; esac
case $ONLY in '' | 24 | remediate) remediate_scenario24; reboot_scenario24 ;; esac
case $ONLY in '' | spank) spank_scenarios ;; 26) spank_scenario26 ;; esac
case $ONLY in '' | jobs) RAN_JOBS=1; jobs_scenarios ;; 26) RAN_JOBS=1; jobs_scenario26 ;; esac
if declare -F hctimeout_scenario26 >/dev/null; then
	case $ONLY in '' | 26 | hct) use_bed_run 26; hctimeout_scenario26 ;; esac
elif [[ $ONLY == hct ]]; then
	fail "hct: no hctimeout_scenario26 ($HERE/hctimeout.sh missing)"
fi
if declare -F quarantine_scenario >/dev/null; then
	case $ONLY in '' | 24 | quarantine) use_bed_run 24; quarantine_scenario ;; esac
	case $ONLY in '' | 26 | quarantine) use_bed_run 26; quarantine_scenario ;; esac
elif [[ $ONLY == quarantine ]]; then
	fail "quarantine: no quarantine_scenario ($HERE/quarantine.sh missing)"
fi
if declare -F faults_scenario26 >/dev/null; then
	case $ONLY in '' | 26 | faults) use_bed_run 26; faults_scenario26 ;; esac
elif [[ $ONLY == faults ]]; then
	fail "faults: no faults_scenario26 ($HERE/faults.sh missing)"
fi

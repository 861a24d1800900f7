#!/usr/bin/env bash
# gpuhc e2e load scenario: a fleet-sized storm against real Slurm
# (make e2e-load; root only; issue 15 item 6).
#
# One chroot test bed (26.05 by default, `load.sh 24` for 24.11) gets
# GPUHC_LOAD_PAPER (1000) extra nodes in slurm.conf, paper0001..., that
# exist only on paper: no slurmd runs for them. The bed's four real nodes
# keep their slurmd. Then GPUHC_LOAD_RUNS (200) gpuhc-healthcheck runs start
# at once inside the chroot, one per paper node (--node NAME), each with its
# own config file, state, lock and event log, all failing the same way
# (--simulate dgxh100 --inject gpu3:xid=79), as a bad driver push would
# make a fleet fail. Node control is REST only (scontrol is
# /nonexistent/scontrol), through test/e2e/wirecount, a byte-counting TCP
# relay in front of slurmrestd, so the REST bytes are measured on the wire.
#
# Then every run is made once more, as the next HealthCheckInterval would:
# round 2. The storm guard's limit is exact only once every drain has
# been counted, and on a slow machine some round-1 runs cannot reach a
# swamped slurmrestd in time; a careful admin wants the limit never
# exceeded by drains that were counted, and the fleet settled within a few
# intervals. While a round still has runs that could not reach slurmrestd
# (a drain, or a give-back, may have landed with its answer lost), one more
# round is made, up to GPUHC_LOAD_MAX_ROUNDS (4); the settled round is the
# first in which every run reached slurmrestd, or the last. So:
#
# Asserted (PASS/FAIL), round 1 (the storm):
#   - every run finished, and its outcome is drained, drain-suppressed, or
#     an error that names slurmrestd (it could not be reached in time), in
#     which case it did not drain;
#   - at most the storm guard's limit (max_drained_nodes, GPUHC_LOAD_LIMIT)
#     is drained, with the XID reason, beyond drains whose count did not
#     go through (the policy state marks them "uncounted"; the next run
#     counts them);
#   - slurmctld stays responsive during the storm: `scontrol ping` answers
#     UP every second and a timed `sinfo` stays under GPUHC_LOAD_SINFO_MAX;
# the settled round (round 2, the next interval, on a machine that keeps up):
#   - every run reached slurmrestd;
#   - exactly the limit is drained, with the XID reason, and those runs say
#     drained or already-drained;
#   - every other run's outcome is drain-suppressed and its event log has
#     exactly one drain-suppressed event; a run that drained alongside the
#     first ones and gave its drain back (the policy's recount) also has its
#     drain and resume events, so the statistics pair them. A node given
#     back may since have been marked DOWN "Not responding" by slurmctld
#     itself (a paper node has no slurmd): gpuhc then leaves it alone, as it
#     must any reason not its own, with a drain-skipped event;
#   - sdiag's RPC counts before and after, the REST calls per failing node
#     (from each run's outcome line) and the bytes per node (wirecount) are
#     printed as a report per round, and kept in $E2E_DIR/load/report.txt.
#
# Why State=DOWN for the paper nodes (probed on 26.05.5): a node that never
# registers, declared UNKNOWN, is UNKNOWN+NOT_RESPONDING past SlurmdTimeout
# and then DOWN with slurmctld's "Not responding" reason, and gpuhc rightly
# never overwrites a reason that is not its own ("gpuhc: …"), so those runs
# would be drain-skipped. FUTURE nodes are not shown by `scontrol show
# node`. CLOUD ones (IDLE+CLOUD+POWERED_DOWN, no reason) belong to power
# saving. Declared DOWN, a node is DOWN+NOT_RESPONDING with an empty reason
# (35 s after start), takes DRAIN through REST and counts in slurmrestd's
# node list, the storm guard's total; the checks below assert the first and
# last on every run. To the storm guard a fleet whose failing nodes are up
# is the same: it only reads DRAIN and the reason.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
BIN=${GPUHC_BIN:-$REPO/bin/gpuhc-healthcheck}
VERSION=${1:-${GPUHC_LOAD_BED:-26}}
RUNS=${GPUHC_LOAD_RUNS:-200}
PAPER=${GPUHC_LOAD_PAPER:-1000}
LIMIT=${GPUHC_LOAD_LIMIT:-10}
JITTER=${GPUHC_LOAD_JITTER:-5s}         # storm_jitter, the shipped default
SINFO_MAX=${GPUHC_LOAD_SINFO_MAX:-10}   # seconds a sinfo may take mid-storm (2-3 s on 2 CPUs; 5.8 s with the CPU halved)
RUN_TIMEOUT=${GPUHC_LOAD_RUN_TIMEOUT:-240}
MAX_ROUNDS=${GPUHC_LOAD_MAX_ROUNDS:-4}   # intervals allowed for the fleet to settle
PAPER_STATE=DOWN

case $VERSION in 24 | 26) ;; *) echo "usage: load.sh [24|26]" >&2; exit 2 ;; esac
((RUNS <= PAPER)) || { echo "load.sh: GPUHC_LOAD_RUNS=$RUNS > GPUHC_LOAD_PAPER=$PAPER" >&2; exit 2; }
[[ $(id -u) == 0 ]] || { echo "load.sh: must run as root" >&2; exit 2; }

# shellcheck source=testbed.sh
source "$HERE/testbed.sh"
e2e_asserts load
e2e_lock load.sh
[[ -x $BIN ]] || { echo "load.sh: $BIN missing; run make build" >&2; exit 2; }

use_bed "$VERSION"
HCL_IN=/srv/gpuhc-load                  # everything of the runs, inside the chroot
HCL=$BROOT$HCL_IN
OUT=$E2E_DIR/load                       # report, monitor samples, sdiag
PROXY_PORT=$((BREST_PORT + 1))
REASON='gpuhc: gpu.xid: gpu3 (SN 1654922000003, 0000:5d:00.0): XID 79 GPU has fallen off the bus [simulated]'
PROXY_PID= MON_PID=

cleanup() {
	local rc=$?
	trap - EXIT
	set +e
	((rc == 0)) || fail "load.sh aborted (exit status $rc)"
	[[ -n $MON_PID ]] && kill "$MON_PID" 2>/dev/null
	[[ -n $PROXY_PID ]] && kill -TERM "$PROXY_PID" 2>/dev/null && wait "$PROXY_PID" 2>/dev/null
	if ((NFAIL > 0)); then
		dump_logs_bed "$BV" 2>&1
		tail -n 20 "$OUT"/monitor.*.txt 2>/dev/null
	fi
	downb
	say "done in $((SECONDS - T0))s"
	echo "load: $NPASS passed, $NFAIL failed"
	exit $((NFAIL == 0 ? 0 : 1))
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# paper_name I: paper0001 …
paper_name() { printf 'paper%04d' "$1"; }

# write_run_conf NAME: the run's own gpuhc.toml, as if each node had its own
# /etc/gpuhc: state, lock and event log under $HCL_IN/n/NAME.
write_run_conf() {
	local d=$HCL_IN/n/$1
	mkdir -p "$HCL/n/$1"/{state,log}
	cat >"$HCL/n/$1/gpuhc.toml" <<EOF
# gpuhc e2e load scenario, node $1
state_dir = "$d/state"
lock_file = "$d/state/gpuhc.lock"
deadline = "40s"
check_timeout = "10s"

[log]
level = "info"
file = "$d/log/gpuhc.jsonl"

[events]
file = "$d/log/events.jsonl"

[policy]
max_drained_nodes = $LIMIT
max_drained_fraction = 0
storm_jitter = "$JITTER"
storm_cache = "60s"

[slurm]
backend = "auto"
url = "http://127.0.0.1:$PROXY_PORT"
token_file = "$BTOKEN_IN"
user = "slurm"
scontrol = "/nonexistent/scontrol"
timeout = "10s"
retries = 2

[checks.thermal]
enabled = false
EOF
}

# rpc_counts FILE: sdiag's RPC counts by message type, "TYPE COUNT" lines.
rpc_counts() {
	sb sdiag | awk '/^Remote Procedure Call statistics by message type/ {on = 1; next}
		/^Remote Procedure Call statistics by user/ {on = 0}
		on && /count:/ {c = $0; sub(/.*count:/, "", c); sub(/ .*/, "", c); print $1, c}' >"$1"
}

# monitor: into $MON_OUT every second, `scontrol ping` and a timed sinfo over the whole
# cluster; one line "EPOCH PING_OK SINFO_SECONDS SINFO_RC" each.
monitor() {
	local t p rc
	while :; do
		p=0
		timeout 10 chroot "$BROOT" scontrol ping 2>/dev/null | grep -q 'is UP' && p=1
		t=$EPOCHREALTIME
		rc=0
		timeout 30 chroot "$BROOT" sinfo -N -h -o '%N %T' >/dev/null 2>&1 || rc=$?
		printf '%s %d %.3f %d\n' "${EPOCHREALTIME%.*}" "$p" "$(bc <<<"$EPOCHREALTIME - $t")" "$rc" >>"$MON_OUT"
		sleep 1
	done
}

# one_run NAME ROUND: the health check on paper node NAME, its output in
# $HCL/n/NAME/run.ROUND.log, its exit status and wall time in
# $HCL/n/NAME/rc.ROUND ("RC SECONDS").
one_run() {
	local t=$EPOCHREALTIME rc=0
	timeout "$RUN_TIMEOUT" chroot "$BROOT" "$HCL_IN/gpuhc-healthcheck" --config "$HCL_IN/n/$1/gpuhc.toml" \
		--node "$1" --simulate dgxh100 --inject gpu3:xid=79 >"$HCL/n/$1/run.$2.log" 2>&1 || rc=$?
	printf '%d %.3f\n' "$rc" "$(bc <<<"$EPOCHREALTIME - $t")" >"$HCL/n/$1/rc.$2"
}

# outcome NAME ROUND: the run's policy line
outcome() { grep '^policy: ' "$HCL/n/$1/run.$2.log" | tail -1; }
uncounted() { jq -e '.drained.uncounted == true' "$HCL/n/$1/state/policy.$1.json" >/dev/null 2>&1; }
# xid_drained NAME: slurmctld shows NAME drained with the XID reason
xid_drained() {
	local line
	line=$(showb "$1")
	[[ $line == *DRAIN* && $(sed -n 's/.* Reason=\(.*\) \[.*/\1/p' <<<"$line") == "$REASON" ]]
}
# gpuhc_drains: nodes sinfo -R shows with a gpuhc reason (sinfo -N prints a
# node once per partition; paper nodes are in two)
gpuhc_drains() { sb sinfo -h -N -R -o '%N|%E' | { grep "|gpuhc: " || true; } | sort -u | wc -l; }
kinds_of() { jq -r -s '[.[] | select(.kind != "transition" and .kind != "measurement" and .kind != "heartbeat") | .kind] | join(",")' "$HCL/n/$1/log/events.jsonl" 2>/dev/null; }

# ------------------------------------------------------------------ bring-up
say "load: Slurm $BL bed, $PAPER paper nodes (State=$PAPER_STATE), $RUNS failing runs at once, storm limit $LIMIT, storm_jitter $JITTER"
need_chroot "$BV"
downb
rm -rf --one-file-system "$HCL" "$OUT"
mkdir -p "$HCL/n" "$OUT"
install -m 0755 "$BIN" "$HCL/gpuhc-healthcheck"
(cd "$REPO" && go build -o "$OUT/wirecount" ./test/e2e/wirecount)

upb "NodeName=paper[0001-$(printf '%04d' "$PAPER")] NodeHostname=$HOST NodeAddr=127.0.0.1 Port=$((BREST_PORT + 9)) CPUs=1 RealMemory=1000 State=$PAPER_STATE
PartitionName=paper Nodes=paper[0001-$(printf '%04d' "$PAPER")] MaxTime=INFINITE State=UP"
start "wirecount$BV" "$OUT/wirecount.out" "$OUT/wirecount" -listen "127.0.0.1:$PROXY_PORT" -to "127.0.0.1:$BREST_PORT"
PROXY_PID=$(pid_of "wirecount$BV")
wait_for 10 "wirecount" http_up "http://127.0.0.1:$PROXY_PORT/openapi/v3"

total=$(sb sinfo -N -h -o '%N' | sort -u | wc -l)
WHY="sinfo lists $total nodes"
expect "load ($BL): slurmctld runs a cluster of $((PAPER + ${#BNODES[@]})) nodes ($PAPER on paper)" [ "$total" -eq $((PAPER + ${#BNODES[@]})) ]
line=$(showb paper0001)
WHY=$line
expect "load ($BL): a paper node is DOWN with no reason (gpuhc may drain it)" \
	eval '[[ $line == *"State=DOWN"* ]] && ! grep -q "Reason=" <<<"$line"'
rest_total=$(curl -sf --max-time 20 -H "X-SLURM-USER-TOKEN: $(cat "$BTOKEN")" \
	"http://127.0.0.1:$BREST_PORT/slurm/$BREST/nodes" | jq '.nodes | length') || rest_total=0
WHY="slurmrestd lists $rest_total"
expect "load ($BL): slurmrestd lists all $total nodes (the storm guard's total)" [ "$rest_total" -eq "$total" ]

for ((i = 1; i <= RUNS; i++)); do write_run_conf "$(paper_name "$i")"; done
expect "load ($BL): --check-config accepts a run's config" \
	sb "$HCL_IN/gpuhc-healthcheck" --check-config "$HCL_IN/n/paper0001/gpuhc.toml"

# ------------------------------------------------------------------ rounds
# round R: all runs at once, the monitor sampling slurmctld, wirecount
# counting the bytes into $OUT/wirecount.R.json, sdiag before and after.
round() {
	local r=$1 i ts pids=()
	rpc_counts "$OUT/sdiag.$r.before"
	# Restart the proxy's count: the checks before went through it.
	stop "wirecount$BV"
	start "wirecount$BV" "$OUT/wirecount.$r.json" "$OUT/wirecount" -listen "127.0.0.1:$PROXY_PORT" -to "127.0.0.1:$BREST_PORT"
	PROXY_PID=$(pid_of "wirecount$BV")
	sleep 0.3
	: >"$OUT/monitor.$r.txt"
	MON_OUT=$OUT/monitor.$r.txt monitor &
	MON_PID=$!
	say "load: round $r: $RUNS runs start"
	ts=$SECONDS
	for ((i = 1; i <= RUNS; i++)); do
		one_run "$(paper_name "$i")" "$r" &
		pids+=($!)
	done
	wait "${pids[@]}" || true
	STORM_S[$r]=$((SECONDS - ts))
	sleep 1
	kill "$MON_PID" 2>/dev/null; wait "$MON_PID" 2>/dev/null || true; MON_PID=
	kill -TERM "$PROXY_PID"; wait "$PROXY_PID" 2>/dev/null || true; PROXY_PID=
	rm -f "$PIDS/wirecount$BV.pid"
	rpc_counts "$OUT/sdiag.$r.after"
	say "load: round $r over in ${STORM_S[$r]}s"
}

# classify R: sort round R's runs into the arrays below by outcome, event
# log and slurmctld's view of the node.
classify() {
	local r=$1 i n o k
	drained=() kept=() suppressed=() gaveback=() unreached=() lost=() other=() norc=() uncount=()
	for ((i = 1; i <= RUNS; i++)); do
		n=$(paper_name "$i")
		[[ -s $HCL/n/$n/rc.$r ]] || { norc+=("$n"); continue; }
		xid_drained "$n" && drained+=("$n")
		uncounted "$n" && uncount+=("$n")
		o=$(outcome "$n" "$r")
		k=$(kinds_of "$n")
		case $o in
		"policy: drained: $REASON ["* | "policy: already-drained: $REASON ["*)
			# A drain lost in round 1 is adopted in round 2, with its event.
			[[ $k == drain || $k == *,drain ]] && kept+=("$n") || other+=("$n: $o / $k") ;;
		"policy: drain-suppressed: "*)
			case $k in
			drain-suppressed) suppressed+=("$n") ;;
			drain,resume,drain-suppressed) suppressed+=("$n"); gaveback+=("$n") ;;
			*) other+=("$n: $o / $k") ;;
			esac ;;
		'policy: foreign-drain: left alone, down by someone else: "Not responding"'*)
			# Given back, then marked DOWN by slurmctld: not gpuhc's to touch.
			case $k in
			drain,resume,drain-suppressed,drain-skipped) suppressed+=("$n"); gaveback+=("$n") ;;
			*) other+=("$n: $o / $k") ;;
			esac ;;
		"policy: error: "*slurmrestd*)
			# A drain that landed while its answer and the re-read were
			# lost: the next run finds our reason and adopts it.
			unreached+=("$n")
			if xid_drained "$n"; then lost+=("$n"); fi ;;
		*) other+=("$n: ${o:-no outcome line: $(tail -1 "$HCL/n/$n/run.$r.log")} / $k") ;;
		esac
	done
	return 0
}

# monitor_verdicts R: slurmctld answered throughout round R
monitor_verdicts() {
	local m=$OUT/monitor.$1.txt samples pings_bad sinfo_max sinfo_bad
	samples=$(wc -l <"$m")
	pings_bad=$(awk '$2 != 1' "$m" | wc -l)
	sinfo_max=$(awk 'BEGIN {m = 0} $3 > m {m = $3} END {print m}' "$m")
	sinfo_bad=$(awk '$4 != 0' "$m" | wc -l)
	WHY="$pings_bad of $samples pings not UP"
	expect "load ($BL), round $1: scontrol ping answered UP in every one of $samples samples" \
		eval '[ "$samples" -ge 3 ] && [ "$pings_bad" -eq 0 ]'
	WHY="slowest sinfo ${sinfo_max}s, $sinfo_bad failed"
	expect "load ($BL), round $1: sinfo over the whole cluster answered every time, slowest ${sinfo_max}s (limit ${SINFO_MAX}s)" \
		eval '[ "$sinfo_bad" -eq 0 ] && awk -v m="$sinfo_max" -v l="$SINFO_MAX" "BEGIN {exit !(m < l)}"'
}

declare -A STORM_S R
round 1
classify 1
all_drained=$(gpuhc_drains)
WHY="${#norc[@]} did not finish: ${norc[*]:0:5}"
expect "load ($BL), round 1: all $RUNS runs finished within ${RUN_TIMEOUT}s" [ "${#norc[@]}" -eq 0 ]
WHY="${#other[@]} others: ${other[*]:0:3}"
expect "load ($BL), round 1: every outcome is drained, drain-suppressed, or slurmrestd out of reach without a drain (${#kept[@]}, ${#suppressed[@]}, ${#unreached[@]})" \
	[ "${#other[@]}" -eq 0 ]
WHY="drained: ${drained[*]}; uncounted: ${uncount[*]}; lost: ${lost[*]}; sinfo -R shows $all_drained gpuhc drains"
expect "load ($BL), round 1: at most the limit ($LIMIT) drained, beyond ${#uncount[@]} drains marked uncounted and ${#lost[@]} whose answer was lost, all with the XID reason" \
	eval '[ "${#drained[@]}" -le $((LIMIT + ${#uncount[@]} + ${#lost[@]})) ] && [ "$all_drained" -eq "${#drained[@]}" ]'
monitor_verdicts 1
R[1]="${#drained[@]} ${#suppressed[@]} ${#gaveback[@]} ${#unreached[@]} $((${#uncount[@]} + ${#lost[@]}))"

r=2
round $r
classify $r
R[$r]="${#drained[@]} ${#suppressed[@]} ${#gaveback[@]} ${#unreached[@]} $((${#uncount[@]} + ${#lost[@]}))"
while ((${#unreached[@]} > 0 && r < MAX_ROUNDS)); do
	say "load: round $r: ${#unreached[@]} runs could not reach slurmrestd; one more interval"
	r=$((r + 1))
	round $r
	classify $r
	R[$r]="${#drained[@]} ${#suppressed[@]} ${#gaveback[@]} ${#unreached[@]} $((${#uncount[@]} + ${#lost[@]}))"
done
SETTLED=$r
all_drained=$(gpuhc_drains)
WHY="${#norc[@]} did not finish: ${norc[*]:0:5}"
expect "load ($BL), round $r: all $RUNS runs finished within ${RUN_TIMEOUT}s" [ "${#norc[@]}" -eq 0 ]
WHY="${#unreached[@]} unreached: ${unreached[*]:0:5}"
expect "load ($BL), round $r: the fleet settled by round $r of at most $MAX_ROUNDS (every run reached slurmrestd)" [ "${#unreached[@]}" -eq 0 ]
WHY="drained: ${drained[*]}; sinfo -R shows $all_drained gpuhc drains"
expect "load ($BL), round $r: exactly the limit ($LIMIT) of paper nodes is drained, with the XID reason, and nothing else by gpuhc" \
	eval '[ "${#drained[@]}" -eq "$LIMIT" ] && [ "$all_drained" -eq "$LIMIT" ]'
WHY="kept: ${kept[*]}"
expect "load ($BL), round $r: the drained nodes are exactly the runs whose outcome is drained or already-drained (events end in the drain)" \
	eval '[ "${kept[*]}" = "${drained[*]}" ]'
WHY="${#suppressed[@]} suppressed; others: ${other[*]:0:3}"
expect "load ($BL), round $r: every other run ($((RUNS - LIMIT))) says drain-suppressed and recorded exactly one drain-suppressed event (or was given back, then marked Not responding by slurmctld)" \
	eval '[ "${#suppressed[@]}" -eq $((RUNS - LIMIT)) ] && [ "${#other[@]}" -eq 0 ] && [ "${#unreached[@]}" -eq 0 ]'
bad=
for n in "${gaveback[@]}"; do
	# The give-back's own line, or, where its answer was lost, the resume a
	# later run found (drain, resume in the events).
	grep -hq 'gave back this drain' "$HCL/n/$n"/run.*.log || [[ $(kinds_of "$n") == drain,resume,* ]] || bad+=" $n"
	[[ $(showb "$n") == *DRAIN* ]] && bad+=" $n(still drained)"
done
WHY="bad:$bad"
expect "load ($BL): the ${#gaveback[@]} runs that drained with the first ones gave the drain back (drain, resume, drain-suppressed; the node is not drained)" [ -z "$bad" ]
WHY="$(grep -h '^policy: ' "$HCL"/n/*/run.*.log | grep -v 'via rest v0.0.4' | grep -v '^policy: error: .*slurmrestd' | head -3 || true)"
expect "load ($BL): every Slurm call went through slurmrestd (scontrol is /nonexistent/scontrol)" \
	eval '! grep -h "^policy: " "$HCL"/n/*/run.*.log | grep -v "^policy: error: .*slurmrestd" | grep -qv "via rest v0.0.4"'
for ((i = 2; i <= r; i++)); do monitor_verdicts "$i"; done

# ------------------------------------------------------------------ report
# report_round R COUNTS...: round R's figures
report_round() {
	local r=$1 calls conns sent received m=$OUT/monitor.$1.txt
	shift
	calls=$(grep -h '^policy: ' "$HCL"/n/*/run.$r.log | sed -n 's/.*\[\([0-9]*\) Slurm calls.*/\1/p')
	read -r conns sent received < <(jq -r '"\(.conns) \(.sent) \(.received)"' "$OUT/wirecount.$r.json" 2>/dev/null || echo "0 0 0")
	echo "round $r: $1 drained, $2 drain-suppressed ($3 of them drained and gave back), $4 could not reach slurmrestd in time, $5 drains not yet counted"
	echo "  wall time ${STORM_S[$r]}s; run wall time (s): $(awk '{print $2}' "$HCL"/n/*/rc.$r | sort -n | awk '{a[NR] = $1} END {printf "min %.1f, median %.1f, max %.1f", a[1], a[int((NR + 1) / 2)], a[NR]}')"
	echo "  slurmctld: $(wc -l <"$m") samples, scontrol ping UP in $(awk '$2 == 1' "$m" | wc -l), sinfo (all nodes) $(awk '{print $3}' "$m" | sort -n | awk '{a[NR] = $1} END {printf "median %.3fs, max %.3fs", a[int((NR + 1) / 2)], a[NR]}')"
	echo "  REST calls per failing node (from each outcome line): $(sort -n <<<"$calls" | awk '{a[NR] = $1; s += $1} END {printf "min %d, mean %.2f, max %d, total %d", a[1], s / NR, a[NR], s}')"
	echo "  REST bytes on the wire (wirecount): $conns connections, $sent bytes sent, $received received; per failing node $((sent / RUNS)) sent, $((received / RUNS)) received"
	echo "  slurmctld RPCs (sdiag, after - before; sdiag's own and the monitor's calls included):"
	join -a 2 -e 0 -o '0,1.2,2.2' <(sort "$OUT/sdiag.$r.before") <(sort "$OUT/sdiag.$r.after") |
		awk '{d = $3 - $2; if (d > 0) {printf "    %-32s %8d\n", $1, d; t += d}} END {printf "    %-32s %8d\n", "total", t}'
}
{
	echo "Storm on Slurm $(sb scontrol --version | awk '{print $2}') ($BL bed): $total nodes in slurm.conf ($PAPER on paper, State=$PAPER_STATE), $RUNS failing runs at once, in $SETTLED rounds (settled in round $SETTLED)"
	echo "policy: max_drained_nodes=$LIMIT, storm_jitter=$JITTER, storm_cache=60s; host: $(nproc) CPUs"
	for ((i = 1; i <= SETTLED; i++)); do
		# shellcheck disable=SC2086 # the five counts, split on purpose
		report_round "$i" ${R[$i]}
	done
} | tee "$OUT/report.txt"

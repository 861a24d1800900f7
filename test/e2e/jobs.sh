#!/usr/bin/env bash
# gpuhc e2e: gpuhc-prolog and gpuhc-epilog as slurmd's Prolog and Epilog,
# against real Slurm (docs/architecture.md#prolog-and-epilog; the test
# beds: test/e2e/README.md).
#
# Sourced by run.sh after testbed.sh (it uses run.sh's say/pass/fail/expect
# and WHY; everything else here is prefixed jobs_), then:
#   jobs_scenarios       # all three test beds; or one of:
#   jobs_scenario22      # Slurm 22.05 (host): (1)
#   jobs_scenario24      # Slurm 24.11 (chroot, gpu[001-004]): (1), (2), (3), (5)
#   jobs_scenario26      # Slurm 26.05 (chroot, gpu[001-004]): the same
#   jobs_dump            # on failure: the Prolog/Epilog output and event logs
# Run directly (root), it is its own driver: test/e2e/jobs.sh [22|24|26].
#
# The scenarios:
#  (1) a healthy node runs jobs through gpuhc-prolog/epilog (srun and
#      sbatch); the job wall time with and without them, and the prolog's
#      own duration from its events, are reported; a job in a partition
#      listed in [prolog] full_partitions gets a "prolog" event with
#      mode "full".
#  (2) a simulated GPU fault in the prolog (gpu003: --simulate dgxh100
#      --inject gpu3:xid=79): the prolog drains gpu003 with the XID reason
#      first and exits 1; slurmd requeues the job (the test bed sets
#      SchedulerParameters=nohold_on_prolog_fail), which shows Restarts=1
#      and later completes on a healthy node.
#  (3) an epilog fault (gpu002: --inject gpu2:dbe=1) drains gpu002 with
#      our reason, which "Epilog error" does not replace; and a process a
#      job leaves behind (its pid passed as gpu2:leftover=PID, looked up
#      in the real /proc) drains gpu004 with [epilog] leftover = "drain".
#  (4) [epilog] admin_comment on every bed: slurmd runs the Epilog while
#      the job is COMPLETING, and slurmctld refuses every job update then
#      ("Job has already finished", error 2084) on 22.05 (scontrol),
#      24.11 and 26.05 (REST; no scontrol fallback for that answer). So
#      the scenario asserts what happens where Slurm does not allow it:
#      the epilog says so, exits as it would have, and `scontrol show job`
#      shows no AdminComment. A bed listed in JOBS_AC_ALLOWED would have
#      to show the summary there instead.
#  (5) an XID injected while a job runs (the epilog's --inject is written
#      after the job started) is attributed to that job id in the event
#      log (kind job-xid), and the job's record is removed.
#
# slurm.conf's Prolog and Epilog take no arguments: a wrapper per program
# runs the binary with the arguments in $DIR/args/<prolog|epilog>.<node>
# (or $DIR/args/<prolog|epilog> for every node), so a scenario changes a
# node's simulated faults by writing a file.
#
# Knobs: GPUHC_BIN_DIR (default bin/: gpuhc-prolog, gpuhc-epilog),
# GPUHC_JOBS_N (jobs per timing series, default 5), GPUHC_E2E_WAIT (seconds
# for a drain or a job, default 30).

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
	set -euo pipefail
	# shellcheck source=testbed.sh
	source "$(dirname "$0")/testbed.sh"
fi

JOBS_REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
JOBS_BIN=${GPUHC_BIN_DIR:-$JOBS_REPO/bin}
JOBS22=$E2E_DIR/jobs22                   # 22.05 files (host)
JOBS_IN=/srv/gpuhc-jobs                  # 24.11 and 26.05 files, inside the chroot
JOBS_N=${GPUHC_JOBS_N:-5}
JOBS_WAIT=${GPUHC_E2E_WAIT:-30}
JOBS_REASON2='gpuhc: gpu.xid: gpu3 (SN 1654922000003, 0000:5d:00.0): XID 79 GPU has fallen off the bus [simulated]'
JOBS_REASON3='gpuhc: gpu.memory: gpu2 (SN 1654922000002, 0000:3a:00.0): volatile DBE 1 > 0 [simulated]'

# ------------------------------------------------------------------ helpers

# jobs_sc BED ARGS...: a Slurm client command on that test bed.
jobs_sc() {
	local bed=$1; shift
	if [[ $bed == 22 ]]; then SLURM_CONF=$S22_CONF timeout 60 "$@"; else bed "$bed"; timeout 60 chroot "$B_ROOT" "$@"; fi
}

# jobs_dir BED: the scenario directory as the host sees it; jobs_in BED: as
# slurmd (and so the Prolog) sees it.
jobs_dir() { if [[ $1 == 22 ]]; then echo "$JOBS22"; else bed "$1"; echo "$B_ROOT$JOBS_IN"; fi; }
jobs_in() { if [[ $1 == 22 ]]; then echo "$JOBS22"; else echo "$JOBS_IN"; fi; }

# jobs_node BED NODE: one line of scontrol show node -o.
jobs_node() { jobs_sc "$1" scontrol show node -o "$2" 2>&1 || true; }
jobs_state() { sed -n 's/.* State=\([^ ]*\) .*/\1/p' <<<"$1"; }
jobs_reason() { sed -n 's/.* Reason=\(.*\) \[[^]]*\]$/\1/p' <<<"$1"; }

# jobs_is BED NODE drained REASON | clean: as run.sh's node_is.
jobs_is() {
	local line st r
	line=$(jobs_node "$1" "$2"); st=$(jobs_state "$line"); r=$(jobs_reason "$line")
	WHY="$2: state=$st reason='$r'"
	case $3 in
	drained) [[ $st == *DRAIN* && $r == "$4" ]] ;;
	clean) [[ $st != *DRAIN* && ($st == IDLE* || $st == MIXED* || $st == ALLOCATED*) ]] ;;
	esac
}

# jobs_wait TIMEOUT CMD...: poll CMD every 0.5 s.
jobs_wait() {
	local end=$((SECONDS + $1)); shift
	until "$@"; do
		((SECONDS < end)) || return 1
		sleep 0.5
	done
}

# jobs_job BED JOBID FIELD: a field of scontrol show job -o (JobState,
# Restarts, NodeList, ...); empty once the job is gone.
jobs_job() {
	{ jobs_sc "$1" scontrol show job -o "$2" 2>/dev/null || true; } | tr ' ' '\n' | sed -n "s/^$3=//p" | head -1
}
jobs_job_is() {
	local got
	got=$(jobs_job "$1" "$2" JobState)
	WHY="job $2: JobState=$got"
	[[ $got == "$3" ]]
}

# jobs_events BED NODE: the node's event log (host path).
jobs_events() { echo "$(jobs_dir "$1")/log/$2.events.jsonl"; }

# jobs_event_has BED NODE JQ_FILTER: some event of NODE matches, within
# 10 s: a run appends its events once its Slurm calls are done, and the
# storm guard's recount after a drain waits out the second of the drain,
# so the node can show the drain before the event is written.
jobs_event_has() {
	local end=$((SECONDS + 10))
	until jobs_event_once "$@"; do
		((SECONDS < end)) || return 1
		sleep 0.5
	done
}
jobs_event_once() {
	local f
	f=$(jobs_events "$1" "$2")
	WHY="$(tail -4 "$f" 2>&1 | cut -c1-300)" || true
	[[ -f $f ]] && jq -e -s "[.[] | select($3)] | length > 0" "$f" >/dev/null
}

# jobs_job_verdict BED JOB NODE JQ: `gpuhc-drain job JOB --json`, run on the
# host over NODE's real event log, matches JQ.
jobs_job_verdict() {
	local out err=$E2E_DIR/job-verdict.err
	out=$("$DRAIN_BIN" job "$2" --json --events "$(jobs_events "$1" "$3")" 2>"$err") || true
	WHY=$(cat "$err" - <<<"$out" | tr '\n' ' ' | cut -c1-400)
	jq -e "$4" <<<"$out" >/dev/null 2>&1
}

# jobs_args BED PROGRAM NODE ARGS: a node's arguments for the prolog or
# epilog ("" removes them: the default file applies again).
jobs_args() {
	local f
	f="$(jobs_dir "$1")/args/$2${3:+.$3}"
	if [[ -z $4 ]]; then rm -f "$f"; else printf '%s\n' "$4" >"$f.tmp" && mv "$f.tmp" "$f"; fi
}

# jobs_wrapper FILE PROGRAM DIR_IN [EXPORTS]: the Prolog or Epilog.
jobs_wrapper() {
	local f=$1 prog=$2 d=$3
	cat >"$f.tmp" <<EOF
#!/bin/sh
# gpuhc e2e $prog (test/e2e/jobs.sh): slurmd passes no arguments.
${4:-}
A=
if [ -f $d/args/$prog.\$SLURMD_NODENAME ]; then A=\$(cat $d/args/$prog.\$SLURMD_NODENAME)
elif [ -f $d/args/$prog ]; then A=\$(cat $d/args/$prog); fi
if [ $prog = epilog ] && [ -f $d/leftover.\$SLURM_JOB_ID ]; then
	A="\$A --inject gpu2:leftover=\$(cat $d/leftover.\$SLURM_JOB_ID)"
fi
echo "=== $prog job \$SLURM_JOB_ID: \$A" >>$d/out/$prog.\$SLURMD_NODENAME.log
$d/gpuhc-$prog --config $d/gpuhc.toml \$A >>$d/out/$prog.\$SLURMD_NODENAME.log 2>&1
rc=\$?
echo "=== $prog job \$SLURM_JOB_ID exit \$rc" >>$d/out/$prog.\$SLURMD_NODENAME.log
exit \$rc
EOF
	chmod 0755 "$f.tmp"
	mv "$f.tmp" "$f"
}

# jobs_files BED: binaries, configuration, wrappers.
jobs_files() {
	local bed=$1 d di slurm exports=
	d=$(jobs_dir "$bed"); di=$(jobs_in "$bed")
	rm -rf --one-file-system "$d"
	mkdir -p "$d"/{args,state,log,out}
	chmod 0755 "$d" "$d/out"
	chmod 1777 "$d/out" # job output of any user
	install -m 0755 "$JOBS_BIN/gpuhc-prolog" "$JOBS_BIN/gpuhc-epilog" "$d/"
	if [[ $bed == 22 ]]; then
		slurm='backend = "scontrol"
scontrol = "/usr/bin/scontrol"'
		# The test bed never writes /etc/slurm on the host.
		exports="SLURM_CONF=$S22_CONF; export SLURM_CONF"
	else
		bed "$bed"
		slurm="backend = \"auto\"
url = \"http://127.0.0.1:$B_REST_PORT\"
token_file = \"$B_TOKEN_IN\"
user = \"slurm\"
scontrol = \"/usr/bin/scontrol\""
	fi
	cat >"$d/gpuhc.toml" <<EOF
# gpuhc e2e, test/e2e/jobs.sh (Slurm $bed)
state_dir = "$di/state/%n"
lock_file = "$di/state/%n.lock"
deadline = "20s"

[log]
level = "info"
file = "$di/log/%n.jsonl"

[events]
file = "$di/log/%n.events.jsonl"

[policy]
storm_jitter = "0s"

[slurm]
$slurm
timeout = "5s"
retries = 1

[prolog]
full_partitions = ["acceptance"]

[epilog]
leftover = "drain"
admin_comment = true

# No CUDA in the test beds: the full prolog's bandwidth check measures
# nothing (it is the mode that is tested here).
[checks.bandwidth]
libcuda = ""
EOF
	jobs_wrapper "$d/prolog.sh" prolog "$di" "$exports"
	jobs_wrapper "$d/epilog.sh" epilog "$di" "$exports"
	# Every node plays a healthy DGX H100 unless a scenario says otherwise.
	jobs_args "$bed" prolog "" "--simulate dgxh100"
	jobs_args "$bed" epilog "" "--simulate dgxh100"
}

# jobs_conf BED [WITH]: the slurm.conf lines; WITH adds Prolog/Epilog.
jobs_conf() {
	local di
	di=$(jobs_in "$1")
	echo "SchedulerParameters=nohold_on_prolog_fail"
	if [[ -n ${2:-} ]]; then
		echo "Prolog=$di/prolog.sh"
		echo "Epilog=$di/epilog.sh"
	fi
}

jobs_up() { if [[ $1 == 22 ]]; then GPUHC_S22_EXTRA=$2 up22; else local -x "GPUHC_S$1_EXTRA=$2"; up_bed "$1"; fi; }
jobs_down() { if [[ $1 == 22 ]]; then down22 quiet; else down_bed "$1" quiet; fi; }

# jobs_time BED NODE N: run N `srun -w NODE /bin/true`, one after
# another; prints the mean wall time in ms, or fails.
jobs_time() {
	local bed=$1 node=$2 n=$3 i t0 total=0
	for ((i = 0; i < n; i++)); do
		t0=$(date +%s%N)
		jobs_sc "$bed" srun -N1 -w "$node" -t 1 /bin/true >/dev/null 2>&1 || return 1
		total=$((total + ($(date +%s%N) - t0) / 1000000))
	done
	echo $((total / n))
}

# jobs_prolog_ms BED NODE: median duration of the node's prologs, in ms,
# from their events.
jobs_prolog_ms() {
	jq -s '[.[] | select(.kind == "prolog") | .seconds * 1000] | sort | if length == 0 then "none" else .[length / 2 | floor] | round end' \
		"$(jobs_events "$1" "$2")" 2>/dev/null
}

# jobs_sbatch BED ARGS...: submit; prints the job id.
jobs_sbatch() {
	local bed=$1 out; shift
	out=$(jobs_sc "$bed" sbatch --chdir="$(jobs_in "$bed")/out" --output="$(jobs_in "$bed")/out/job.%j.out" "$@" 2>&1) || { WHY=$out; return 1; }
	sed -n 's/^Submitted batch job \([0-9][0-9]*\)$/\1/p' <<<"$out"
}

# ------------------------------------------------------------ scenario (1)

# jobs_healthy BED NODE: jobs run through the Prolog and Epilog, the node
# stays idle, every run is silent; the timing is reported.
jobs_healthy() {
	local bed=$1 node=$2 l=$3 before=$4 with ms j f nodevar=SLURM_JOB_NODELIST
	# 22.05 names the job's node list SLURM_NODELIST
	# (docs/architecture.md#prolog-and-epilog).
	[[ $bed == 22 ]] && nodevar=SLURM_NODELIST
	f=$(jobs_events "$bed" "$node")
	if with=$(jobs_time "$bed" "$node" "$JOBS_N"); then
		pass "$l: $JOBS_N srun jobs run through gpuhc-prolog/epilog on $node"
	else
		fail "$l: srun jobs run through gpuhc-prolog/epilog on $node ($(jobs_sc "$bed" srun -N1 -w "$node" /bin/true 2>&1 | tr '\n' ' '))"
		return 0
	fi
	ms=$(jobs_prolog_ms "$bed" "$node") || ms=unknown
	say "$l: srun /bin/true mean wall time: ${before} ms without, ${with} ms with gpuhc-prolog/epilog (+$((with - before)) ms); the prolog itself: median ${ms} ms"
	expect "$l: $node stays idle after the jobs" jobs_is "$bed" "$node" clean
	WHY="$(grep -c '^policy: none \[0 Slurm calls\]' "$(jobs_dir "$bed")/out/prolog.$node.log" 2>&1) of $JOBS_N prologs silent" || true
	expect "$l: every prolog was healthy and silent (policy: none, 0 Slurm calls)" \
		[ "$(grep -c '^policy: none \[0 Slurm calls\]' "$(jobs_dir "$bed")/out/prolog.$node.log" 2>/dev/null)" -ge "$JOBS_N" ]
	WHY="$(grep -h 'job environment' "$(jobs_dir "$bed")/out/"*.log 2>/dev/null | head -3)" || true
	expect "$l: the job environment parsed without complaint (SLURM_JOB_ID, _UID, _USER, node list, context)" \
		eval '! grep -q "job environment" "$(jobs_dir "$bed")/out/"*.log'
	WHY="$(grep -m1 'msg=job ' "$(jobs_dir "$bed")/out/prolog.$node.log" 2>&1)" || true
	expect "$l: the prolog found the job's node list in $nodevar and its context prolog_slurmd" \
		grep -q "msg=job .*context=prolog_slurmd .*nodes=$node nodes_from=$nodevar " "$(jobs_dir "$bed")/out/prolog.$node.log"
	expect "$l: prolog and epilog events carry job id, user and mode quick" \
		jobs_event_has "$bed" "$node" '.kind == "prolog" and .mode == "quick" and (.job_id | test("^[0-9]+$")) and .user == "root" and .status == "OK"'
	expect "$l: the epilog events carry the job id" \
		jobs_event_has "$bed" "$node" '.kind == "epilog" and (.job_id | test("^[0-9]+$")) and .status == "OK"'
	expect "$l: no drain, no transition in the event log" \
		eval "! jq -e -s '[.[] | select(.kind != \"prolog\" and .kind != \"epilog\")] | length > 0' '$f' >/dev/null"
	jobs_comment "$bed" "$node" "${l% (1)}"
	if [[ $bed != 22 ]]; then
		# Made here, not in slurm.conf: testbed.sh's up_bed counts one
		# sinfo line per node.
		WHY=$(jobs_sc "$bed" scontrol create PartitionName=acceptance Nodes=ALL State=UP 2>&1) || true
		j=$(jobs_sbatch "$bed" -p acceptance -w "$node" --wrap=true) || true
		WHY="sbatch: ${j:-$WHY}"
		expect "$l: sbatch -p acceptance (a full_partitions partition) completes" \
			jobs_wait "$JOBS_WAIT" jobs_job_is "$bed" "${j:-none}" COMPLETED
		expect "$l: its prolog event says mode full (grep '\"mode\":\"full\"')" \
			jobs_wait 10 jobs_event_has "$bed" "$node" ".kind == \"prolog\" and .mode == \"full\" and .job_id == \"${j:-none}\""
	fi
}

jobs_scenario22() {
	say "jobs: Slurm 22.05 (host): gpuhc-prolog/epilog as Prolog/Epilog"
	RAN_JOBS22=1
	local t0=$SECONDS node=$S22_NODE before
	down22 quiet
	jobs_files 22
	jobs_up 22 "$(jobs_conf 22)"
	before=$(jobs_time 22 "$node" "$JOBS_N") || before=0
	down22 quiet
	jobs_up 22 "$(jobs_conf 22 with)"
	jobs_healthy 22 "$node" "22.05 (1)" "$before"
	down22 quiet
	say "jobs: 22.05 done in $((SECONDS - t0))s"
}

# ------------------------------------------------------------ scenario (4)

# Beds whose slurmctld lets the Epilog set AdminComment: none of 22.05,
# 24.11 and 26.05 (verified; docs/slurm.md).
JOBS_AC_ALLOWED=${GPUHC_E2E_AC_ALLOWED:-}

# jobs_admin_comment BED NODE LABEL JOB SUMMARY VIA: job JOB's epilog on
# NODE tried to set SUMMARY as its AdminComment through VIA ("scontrol",
# "rest v0.0.42"): set where the bed allows it, else refused and said.
jobs_admin_comment() {
	local bed=$1 node=$2 l=$3 j=$4 sum=$5 via=$6 log ac
	log="$(jobs_dir "$bed")/out/epilog.$node.log"
	ac=$(jobs_job "$bed" "$j" AdminComment)
	if [[ " $JOBS_AC_ALLOWED " == *" $bed "* ]]; then
		WHY="AdminComment='$ac'"
		expect "$l: job $j's AdminComment is the epilog's summary '$sum' (scontrol show job)" [ "$ac" = "$sum" ]
		return 0
	fi
	WHY="$(grep "^job $j: AdminComment" "$log" 2>&1 | cut -c1-400)" || true
	expect "$l: job $j's epilog tried '$sum' via $via and Slurm refused it: Job has already finished (job completing)" \
		grep -qF "job $j: AdminComment not set: Slurm refuses to update a completing job: job $j AdminComment via $via: " "$log"
	expect "$l: ... the refusal named Slurm's words" eval "grep '^job $j: AdminComment not set' '$log' | grep -q 'Job has already finished'"
	WHY="scontrol was tried after REST"
	expect "$l: ... and no scontrol fallback for slurmctld's definite answer" eval "! grep -q '^job $j: AdminComment not set.*after slurmrestd failed' '$log'"
	WHY="AdminComment='$ac'"
	expect "$l: scontrol show job $j: no AdminComment (Slurm does not allow it from the Epilog)" [ -z "$ac" ]
}

# jobs_comment BED NODE LABEL: a healthy job's epilog and its summary.
jobs_comment() {
	local bed=$1 node=$2 l="$3 (4)" j via=scontrol
	[[ $bed != 22 ]] && { bed "$bed"; case $bed in 24) via="rest v0.0.42" ;; 26) via="rest v0.0.45" ;; esac; }
	j=$(jobs_sbatch "$bed" -w "$node" --wrap=true) || true
	expect "$l: job ${j:-?} on $node completes" jobs_wait "$JOBS_WAIT" jobs_job_is "$bed" "${j:-none}" COMPLETED
	expect "$l: its epilog exited 0" jobs_wait 10 grep -q "^=== epilog job $j exit 0" "$(jobs_dir "$bed")/out/epilog.$node.log"
	jobs_admin_comment "$bed" "$node" "$l" "$j" "gpuhc: no hardware fault seen" "$via"
	say "$l: $(grep "^job $j: AdminComment" "$(jobs_dir "$bed")/out/epilog.$node.log" | cut -c1-300)"
}

# ------------------------------------------------------------ scenario (2)

# jobs_requeued JOBID: requeued after its Prolog failed, waiting to run.
jobs_requeued() {
	local n st
	n=$(jobs_job "$JB" "$1" Restarts); st=$(jobs_job "$JB" "$1" JobState)
	WHY="job $1: JobState=$st Restarts=$n"
	[[ $n =~ ^[0-9]+$ ]] && ((n >= 1)) && [[ $st == PENDING ]]
}

jobs_prolog_fault() {
	local l="$JL (2)" j n nodes et wait
	jobs_args "$JB" prolog gpu003 "--simulate dgxh100 --inject gpu3:xid=79"
	# Only gpu003 can take the job: the others are held by an admin drain.
	jobs_sc "$JB" scontrol update NodeName=gpu001,gpu002,gpu004 State=DRAIN Reason="e2e: hold"
	j=$(jobs_sbatch "$JB" --wrap=hostname) || true
	say "$l: job ${j:-?} submitted; gpu003's prolog simulates XID 79 on gpu3"
	expect "$l: the prolog drains gpu003 with exactly '$JOBS_REASON2'" \
		jobs_wait "$JOBS_WAIT" jobs_is "$JB" gpu003 drained "$JOBS_REASON2"
	WHY="$(grep -A1 'exit 1' "$JD/out/prolog.gpu003.log" | head -2 | tr '\n' ' ')" || true
	expect "$l: the prolog said it exits 1 so slurmd requeues job $j" \
		wait_for 10 "the prolog's exit line" grep -q "^exit 1: slurmd requeues job $j" "$JD/out/prolog.gpu003.log"
	expect "$l: job $j was requeued, not failed: Restarts=1, pending" \
		jobs_wait "$JOBS_WAIT" jobs_requeued "$j"
	et=$(jobs_job "$JB" "$j" EligibleTime)
	say "$l: scontrol show job $j: JobState=$(jobs_job "$JB" "$j" JobState) Restarts=$(jobs_job "$JB" "$j" Restarts) Reason=$(jobs_job "$JB" "$j" Reason) EligibleTime=$et"
	# slurmctld holds a requeued job back for a while (Reason=BeginTime):
	# wait for that too, at most 5 minutes.
	wait=$(($(date -d "$et" +%s 2>/dev/null || date +%s) - $(date +%s)))
	wait=$((JOBS_WAIT + (wait > 0 ? (wait < 300 ? wait : 300) : 0)))
	expect "$l: gpu003's event log: the drain by the prolog, with job id $j" \
		jobs_event_has "$JB" gpu003 ".kind == \"drain\" and .by == \"prolog\" and .job_id == \"$j\" and .message == \"$JOBS_REASON2\""
	expect "$l: gpu003's event log: a prolog event with status FAIL for job $j" \
		jobs_event_has "$JB" gpu003 ".kind == \"prolog\" and .status == \"FAIL\" and .job_id == \"$j\""
	# A healthy node comes back: the job runs there and completes.
	jobs_sc "$JB" scontrol update NodeName=gpu001 State=RESUME
	expect "$l: job $j completes on a healthy node once one is free and it is eligible" \
		jobs_wait "$wait" jobs_job_is "$JB" "$j" COMPLETED
	nodes=$(jobs_job "$JB" "$j" NodeList)
	WHY="NodeList=$nodes"
	expect "$l: ... on gpu001, not gpu003" [ "$nodes" = gpu001 ]
	expect "$l: gpu003 keeps our reason after slurmd saw the prolog fail" jobs_is "$JB" gpu003 drained "$JOBS_REASON2"
	jobs_args "$JB" prolog gpu003 ""
	for n in gpu002 gpu003 gpu004; do jobs_sc "$JB" scontrol update NodeName=$n State=RESUME || true; done
}

# ------------------------------------------------------------ scenario (3)

# jobs_leftover_drained JOBID: gpu004 drained for the sleep JOBID left.
jobs_leftover_drained() {
	local line st r
	line=$(jobs_node "$JB" gpu004); st=$(jobs_state "$line"); r=$(jobs_reason "$line")
	WHY="gpu004: state=$st reason='$r'"
	[[ $st == *DRAIN* && $r == "gpuhc: job.leftover: gpu2 (SN 1654922000002, 0000:3a:00.0): pid "*" (sleep, uid 0) holds 1024 MiB after job $1 [simulated]" ]]
}

jobs_epilog_fault() {
	local l="$JL (3)" j pid
	jobs_args "$JB" epilog gpu002 "--simulate dgxh100 --inject gpu2:dbe=1"
	j=$(jobs_sbatch "$JB" -w gpu002 --wrap=true) || true
	say "$l: job ${j:-?} on gpu002; its epilog simulates a DBE on gpu2"
	expect "$l: the epilog drains gpu002 with exactly '$JOBS_REASON3'" \
		jobs_wait "$JOBS_WAIT" jobs_is "$JB" gpu002 drained "$JOBS_REASON3"
	expect "$l: the epilog exited 1 (fail_exit) after draining" \
		jobs_wait 10 grep -q "^=== epilog job $j exit 1" "$JD/out/epilog.gpu002.log"
	sleep 3
	expect "$l: the reason is still ours, not 'Epilog error'" jobs_is "$JB" gpu002 drained "$JOBS_REASON3"
	expect "$l: gpu002's event log: the memory error during job $j (job-memory)" \
		jobs_event_has "$JB" gpu002 ".kind == \"job-memory\" and .job_id == \"$j\" and .component == \"gpu2\" and (.message | startswith(\"volatile DBE 0 -> 1 during job $j\"))"
	expect "$l: gpu002's event log: the drain by the epilog with job id $j" \
		jobs_event_has "$JB" gpu002 ".kind == \"drain\" and .by == \"epilog\" and .job_id == \"$j\""
	jobs_admin_comment "$JB" gpu002 "$l" "$j" "gpuhc: gpu2 (SN 1654922000002) volatile DBE 0 -> 1 [simulated]; node drained" "rest $BREST_AC"
	expect "$l: gpuhc-drain job $j: the DBE coincided with the job's end" \
		jobs_job_verdict "$JB" "$j" gpu002 '.fault_at_end and (.verdict | startswith("YES")) and [.nodes[].node] == ["gpu002"] and any(.events[]; .kind == "job-memory")'
	jobs_args "$JB" epilog gpu002 ""
	jobs_sc "$JB" scontrol update NodeName=gpu002 State=RESUME || true

	# A process left behind: the job starts it in its own session and
	# writes its pid where the Epilog wrapper passes it on as
	# --inject gpu2:leftover=PID; the epilog finds it in /proc, with the
	# job's SLURM_JOB_ID in its environment.
	j=$(jobs_sbatch "$JB" -w gpu004 --wrap="setsid /bin/sleep 300 </dev/null >/dev/null 2>&1 & echo \$! >$JOBS_IN/leftover.\$SLURM_JOB_ID") || true
	say "$l: job ${j:-?} on gpu004 leaves /bin/sleep running"
	expect "$l: the epilog drains gpu004 for the leftover process of job $j" \
		jobs_wait "$JOBS_WAIT" jobs_leftover_drained "$j"
	say "$l: gpu004: $(jobs_reason "$(jobs_node "$JB" gpu004)")"
	expect "$l: gpu004's event log: the leftover (job-leftover) with job id $j" \
		jobs_event_has "$JB" gpu004 ".kind == \"job-leftover\" and .job_id == \"$j\" and .status == \"FAIL\""
	pid=$(cat "$JD/leftover.$j" 2>/dev/null) || pid=
	# The sleep the job left: ours to end, by pid, once sure it is it.
	if [[ -n $pid ]] && grep -q "SLURM_JOB_ID=$j" <(tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null); then
		kill "$pid" 2>/dev/null || true
	fi
	rm -f "$JD/leftover.$j"
	jobs_sc "$JB" scontrol update NodeName=gpu004 State=RESUME || true
}

# ------------------------------------------------------------ scenario (5)

jobs_xid_during_job() {
	local l="$JL (5)" j
	j=$(jobs_sbatch "$JB" -w gpu001 --wrap="sleep 8") || true
	expect "$l: job ${j:-?} runs on gpu001" jobs_wait "$JOBS_WAIT" jobs_job_is "$JB" "${j:-none}" RUNNING
	jobs_args "$JB" epilog gpu001 "--simulate dgxh100 --inject gpu5:xid=13"
	say "$l: while job $j runs, XID 13 is injected on gpu5 (the epilog's simulation)"
	expect "$l: job $j completes" jobs_wait "$JOBS_WAIT" jobs_job_is "$JB" "$j" COMPLETED
	expect "$l: gpu001's event log attributes XID 13 on gpu5 to job $j (job-xid)" \
		jobs_wait 10 jobs_event_has "$JB" gpu001 ".kind == \"job-xid\" and .job_id == \"$j\" and .xid == 13 and .component == \"gpu5\" and .serial == \"1654922000005\" and .status == \"WARN\""
	WHY="$(ls "$JD/state/gpu001/simulated/jobs/" 2>&1)" || true
	expect "$l: job $j's record is gone after its epilog" [ ! -e "$JD/state/gpu001/simulated/jobs/job.$j.json" ]
	expect "$l: a warn-class XID does not drain gpu001" jobs_is "$JB" gpu001 clean
	expect "$l: gpuhc-drain job $j: the XID is shown, and no hardware fault is claimed" \
		jobs_job_verdict "$JB" "$j" gpu001 '.faults == 0 and (.fault_at_end | not) and (.verdict | startswith("no hardware fault")) and any(.events[]; .kind == "job-xid" and .xid == 13)'
	jobs_args "$JB" epilog gpu001 ""
}

# jobs_scenario_bed 24|26: (1), (2), (3) and (5) on that chroot bed. JB is
# the bed, JL its label ("24.11", "26.05"), JD its scenario directory as the
# host sees it.
jobs_scenario_bed() {
	JB=$1
	bed "$JB"
	JL=$B_LABEL JD=$B_ROOT$JOBS_IN
	case $JB in 24) BREST_AC=v0.0.42 ;; 26) BREST_AC=v0.0.45 ;; esac
	say "jobs: Slurm $JL (chroot): gpuhc-prolog/epilog on gpu[001-004]"
	declare -g "RAN_JOBS$JB=1"
	local t0=$SECONDS before
	need_chroot "$JB"
	jobs_down "$JB"
	mkdir -p "$B_ROOT/srv"
	jobs_files "$JB"
	jobs_up "$JB" "$(jobs_conf "$JB")"
	before=$(jobs_time "$JB" gpu001 "$JOBS_N") || before=0
	jobs_down "$JB"
	# up_bed rewrites the chroot's config but leaves $JD alone.
	jobs_up "$JB" "$(jobs_conf "$JB" with)"
	WHY="$(jobs_sc "$JB" "$JOBS_IN/gpuhc-prolog" --version 2>&1)" || true
	expect "$JL: the cgo-built gpuhc-prolog and gpuhc-epilog run in the chroot" \
		eval 'jobs_sc "$JB" "$JOBS_IN/gpuhc-prolog" --version && jobs_sc "$JB" "$JOBS_IN/gpuhc-epilog" --version'
	jobs_healthy "$JB" gpu001 "$JL (1)" "$before"
	jobs_prolog_fault
	jobs_epilog_fault
	jobs_xid_during_job
	jobs_down "$JB"
	say "jobs: $JL done in $((SECONDS - t0))s"
}
jobs_scenario24() { jobs_scenario_bed 24; }
jobs_scenario26() { jobs_scenario_bed 26; }

jobs_scenarios() {
	jobs_scenario22
	jobs_scenario24
	jobs_scenario26
}

# jobs_dump: what a failure needs (call from run.sh's dump_all).
jobs_dump() {
	local d f
	[[ -n ${RAN_JOBS22:-} ]] && dump_logs22 2>&1
	[[ -n ${RAN_JOBS24:-} ]] && dump_logs24 2>&1
	[[ -n ${RAN_JOBS26:-} ]] && dump_logs26 2>&1
	for d in ${RAN_JOBS22:+"$JOBS22"} ${RAN_JOBS24:+"$ROOT24$JOBS_IN"} ${RAN_JOBS26:+"$ROOT26$JOBS_IN"}; do
		for f in "$d"/out/*.log "$d"/log/*.events.jsonl; do
			[[ -f $f ]] || continue
			echo "===== $f (last 40 lines)"; tail -40 "$f"
		done
	done
	return 0
}

# ------------------------------------------------------------------ driver
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
	for b in gpuhc-prolog gpuhc-epilog; do
		[[ -x $JOBS_BIN/$b ]] || { echo "jobs.sh: $JOBS_BIN/$b missing; run make build" >&2; exit 2; }
	done
	e2e_standalone jobs "$@"
fi

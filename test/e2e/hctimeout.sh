#!/usr/bin/env bash
# The HealthCheckTimeout scenario (sourced by run.sh; standalone:
# `GPUHC_E2E_ONLY=hct test/e2e/run.sh`): Slurm 26.05 kills the health
# check at HealthCheckTimeout (SIGTERM, SIGKILL 10 ms later). gpuhc reads
# the limit from slurm.conf (the chroot's /etc/slurm/slurm.conf, through
# its Include of extra.conf) and fits its run inside it.
#
# gpu001 runs a simulated DGX H100 with XID 79 on gpu3 (a FAIL found at
# once) and a hung check: the chroot's /proc/meminfo is a FIFO nobody
# writes (bind-mounted over it), so host.memory blocks in open(2) as a
# check on a hung filesystem does. HealthCheckTimeout=10,
# HealthCheckInterval=15.
#   1. --check-config refuses the scenarios' usual deadline (20s), with the
#      arithmetic.
#   2. With the built-in deadline (clamped to 5s), gpu001 drains within
#      the limit: the early drain goes out while host.memory still hangs,
#      the run ends before slurmd's kill, the event log has the drain.
#   3. Told a wrong limit (health_check_timeout = "60s", deadline 20s), the
#      run outlives HealthCheckTimeout: slurmd's SIGTERM leaves a "killed"
#      event naming host.memory, and the early drain is in place anyway.
HCT_IN=/srv/gpuhc-hct               # scenario files (inside the chroot)
HCT_LIMIT=10                        # HealthCheckTimeout
HCT_INTERVAL=15                     # HealthCheckInterval, above it

# hct_conf [LINES]: the scenario config: conf_head less its deadline,
# LINES added under [slurm].
hct_conf() {
	conf_head "$HCT_IN" "HealthCheckTimeout scenario (Slurm $BL chroot)" |
		sed "/^deadline = /d; s/^check_timeout = .*/check_timeout = \"4s\"/; /^\[slurm\]/a ${1:-# limit from slurm.conf}" >"$HCT/gpuhc.toml.tmp"
	mv "$HCT/gpuhc.toml.tmp" "$HCT/gpuhc.toml"
}

# hct_event JQ: gpu001's event log has an event matching JQ
hct_event() {
	WHY="$(tail -3 "$HCT/log/gpu001.events.jsonl" 2>&1 | head -c 800)"
	jq -e -s "[.[] | select($1)] | length > 0" "$HCT/log/gpu001.events.jsonl" >/dev/null 2>&1
}

# hct_drain_in_limit: the drain event came less than HealthCheckTimeout
# after the start of the run that made it (starts.gpu001 has each run's
# start, seconds since the epoch).
hct_drain_in_limit() {
	local at start
	at=$(jq -r -s '[.[] | select(.kind == "drain")] | first | .time | sub("\\.[0-9]+"; "") | fromdate' "$HCT/log/gpu001.events.jsonl" 2>/dev/null) || return 1
	start=$(awk -v at="$at" '$1 <= at + 1 {s = $1} END {print s}' "$HCT/starts.gpu001")
	WHY="drain at $at, run started at $start"
	[[ -n $start ]] && awk -v a="$at" -v s="$start" -v l="$HCT_LIMIT" 'BEGIN {exit !(a - s < l)}'
}

hctimeout_scenario26() {
	say "HealthCheckTimeout: Slurm $BL, HealthCheckTimeout=$HCT_LIMIT, a FAIL plus a hung check"
	HCT=$BROOT$HCT_IN
	ran "$HCT"
	need_chroot "$BV"
	downb
	rm -rf --one-file-system "$HCT"
	mkdir -p "$HCT"/{state,log}
	install -m 0755 "$BIN" "$HCT/gpuhc-healthcheck"
	# Only gpu001 runs gpuhc; each run's start is recorded for the timing.
	hc_wrapper "$HCT/healthcheck.sh" "$HCT_IN/gpuhc-healthcheck" "$HCT_IN/gpuhc.toml" "$HCT_IN" \
		"[ \"\$SLURMD_NODENAME\" = gpu001 ] || exit 0
date +%s.%N >>$HCT_IN/starts.gpu001" \
		'--simulate dgxh100 --inject gpu3:xid=79'
	hct_conf
	upb "$(printf 'HealthCheckProgram=%s\nHealthCheckInterval=%s\nHealthCheckNodeState=ANY\nHealthCheckTimeout=%s\n' \
		"$HCT_IN/healthcheck.sh" "$HCT_INTERVAL" "$HCT_LIMIT")"

	WHY=$(sb scontrol show config 2>&1 | grep -i '^HealthCheckTimeout')
	expect "$BL (hct): slurmctld runs with HealthCheckTimeout = $HCT_LIMIT sec" grep -q "= $HCT_LIMIT sec" <<<"$WHY"
	WHY=$(sb "$HCT_IN/gpuhc-healthcheck" --check-config "$HCT_IN/gpuhc.toml" 2>&1)
	expect "$BL (hct): --check-config reads HealthCheckTimeout 10s from slurm.conf and fits the built-in deadline to 5s" \
		grep -q 'HealthCheckTimeout 10s (/etc/slurm/slurm.conf): deadline 5s, Slurm calls until 7s, watchdog 8s' <<<"$WHY"
	sed 's/^state_dir = /deadline = "20s"\n&/' "$HCT/gpuhc.toml" >"$HCT/deadline20.toml"
	WHY=$(sb "$HCT_IN/gpuhc-healthcheck" --check-config "$HCT_IN/deadline20.toml" 2>&1) && WHY="accepted: $WHY"
	expect "$BL (hct): --check-config refuses deadline 20s with the arithmetic" \
		grep -q 'deadline 20s + 2s for the drain + 3s margin > HealthCheckTimeout 10s' <<<"$WHY"

	# The hung check: the chroot's /proc/meminfo becomes a FIFO nobody
	# writes (bind-mounted over it; the host's is untouched).
	mkfifo "$HCT/meminfo.fifo"
	mount --bind "$HCT/meminfo.fifo" "$BROOT/proc/meminfo"
	touch "$HCT/armed"
	say "$BL (hct): armed"
	expect "$BL (hct): gpu001 (XID 79 plus a hung check) drained within $((HCT_INTERVAL * 2 + 10))s" \
		wait_node $((HCT_INTERVAL * 2 + 10)) showb gpu001 drained "gpuhc: gpu.xid: " slurm
	wait_runs "$HCT" gpu001 1 || true
	expect "$BL (hct): the drain went out early, while host.memory still ran" \
		grep -q '^early: policy: drained' "$HCT/runs.gpu001.log"
	expect "$BL (hct): the event log has the drain (gpu.xid), within HealthCheckTimeout of the run's start" \
		eval 'hct_event '"'"'.kind == "drain" and .check == "gpu.xid"'"'"' && hct_drain_in_limit'
	WHY=$(grep -m1 -E '^host\.memory +host +ERROR' "$HCT/runs.gpu001.log")
	expect "$BL (hct): the hung check is reported as timed out (ERROR)" grep -q 'timed out after' <<<"$WHY"
	# slurmd logs the exit once it has reaped the run, which can be a
	# moment after the run printed its policy line on a busy machine.
	expect "$BL (hct): the run exited 1 (FAIL) in its own time, as slurmd logs" \
		wait_for 10 "slurmd's rc:1 line" grep -q 'health_check failed: rc:1' "$B_DIR/log/slurmd.gpu001.log"
	WHY=$(grep -i 'health_check' "$B_DIR/log/slurmd.gpu001.log" | tail -2 || true)
	expect "$BL (hct): slurmd never killed a fitted run" eval '! grep -Eq "health_check killed|health_check: timeout" "$B_DIR/log/slurmd.gpu001.log"'

	# 3. A limit gpuhc misreads: the SIGTERM backstop.
	hct_conf 'health_check_timeout = "60s"'
	sed -i 's/^state_dir = /deadline = "20s"\n&/; s/^check_timeout = .*/check_timeout = "20s"/' "$HCT/gpuhc.toml"
	expect "$BL (hct): gpu001's SIGTERM at HealthCheckTimeout leaves a killed event naming host.memory" \
		eval 'for _ in $(seq $((HCT_INTERVAL * 3))); do hct_event '"'"'.kind == "killed" and (.message | test("still running: .*host.memory"))'"'"' && break; sleep 1; done; hct_event '"'"'.kind == "killed" and (.message | test("still running: .*host.memory"))'"'"''
	WHY=$(grep -i 'health_check' "$B_DIR/log/slurmd.gpu001.log" | tail -2 || true)
	# 26.05.5 logs "health_check: timeout after 10000 ms: killing pgid N".
	expect "$BL (hct): slurmd logs the kill at HealthCheckTimeout" \
		grep -q "health_check: timeout after ${HCT_LIMIT}000 ms: killing pgid" "$B_DIR/log/slurmd.gpu001.log"
	expect "$BL (hct): the early drain is still in place after the kill" node_is showb gpu001 drained "gpuhc: gpu.xid: " slurm

	rm -f "$HCT/armed"
	umount "$BROOT/proc/meminfo" 2>/dev/null || umount -l "$BROOT/proc/meminfo" || true
	sb scontrol update NodeName=gpu001 State=RESUME >/dev/null 2>&1 || true
	downb
}

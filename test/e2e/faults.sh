#!/usr/bin/env bash
# Fault injection (sourced by run.sh; alone: `GPUHC_E2E_ONLY=faults
# test/e2e/run.sh`): the daemons and disks gpuhc-healthcheck depends on
# fail under it, on the Slurm 26.05 bed, backend "auto" (slurmrestd, then
# the chroot's /usr/bin/scontrol). The judge is the real slurmctld's node
# state, gpuhc's event log and its JSON log.
#
# Only gpu001 runs gpuhc, started here as slurmd starts HealthCheckProgram
# (env -i SLURMD_NODENAME=gpu001, no arguments but the config), so each
# run can be timed and placed exactly between two faults; slurmd runs no
# health check of its own. Its fault is a required tmpfs mount
# (host.mounts): unmounted, every run FAILs; mounted, every run is
# healthy. [slurm] health_check_timeout = "10s" gives each run the budget
# deadline 2s, Slurm calls until 7s, watchdog 8s: "in time" below is rc as
# expected, under the watchdog and without its message. The state
# directory (256 KiB) and the event log's directory (64 KiB, case 5) are
# tmpfs of their own, so they can be filled and remounted read-only.
#   1. slurmrestd SIGSTOPped, a failing run's first REST request in flight
#      (a connection established to the stopped slurmrestd), then
#      SIGKILLed: the run falls back to scontrol and drains (reason set by
#      root), logs "slurmrestd failed; falling back to scontrol"; after a
#      restart of slurmrestd the healed node is resumed through REST.
#   2. slurmctld stopped (slurmrestd then answers after ~9 s): a failing
#      run drains nothing and records no drain, logs that the policy could
#      not act and exits in time; a healthy run makes no Slurm call; once
#      slurmctld is back the next failing run drains (through REST).
#   3. The state directory full (dd), then read-only (remount,ro): a
#      healthy run does not drain, a failing run drains and logs that its
#      state could not be saved (ENOSPC, EROFS), not that the policy could
#      not act (what it logged before internal/healthcheck's errStateLost).
#   4. The clock stepped back, simulated: every timestamp in the state
#      directory's JSON records (policy state, history, storm cache, API
#      version cache) moved a day ahead, twice: healthy runs neither drain
#      nor crash (they resume gpuhc's drain), the failing run drains.
#   5. The event log's disk full: a failing run drains, logs that the
#      event log could not be written, exits in time.
# Every run's wall time goes to times.txt (and the scenario's log).
FLT_IN=/srv/gpuhc-flt               # scenario files (inside the chroot)
FLT_NODE=gpu001
FLT_LIMIT=10                        # [slurm] health_check_timeout
FLT_WDOG=8                          # the watchdog that limit gives (checked)

# flt_conf: the scenario config: conf_head with the scontrol fallback, the
# limit, the event log in a directory of its own, and the required mount.
flt_conf() {
	{
		conf_head "$FLT_IN" "fault injection (Slurm $BL chroot, auto: REST then scontrol)" /usr/bin/scontrol |
			sed "/^\[slurm\]/a health_check_timeout = \"${FLT_LIMIT}s\"
s|^file = \"$FLT_IN/log/%n.events.jsonl\"|file = \"$FLT_IN/events/%n.jsonl\"|"
		cat <<EOF

[[checks.mounts.mount]]
path = "$FLT_IN/mnt"
fstype = "tmpfs"
writable = true
EOF
	} >"$FLT/gpuhc.toml.tmp"
	mv "$FLT/gpuhc.toml.tmp" "$FLT/gpuhc.toml"
}

# flt_fault on|off: gpu001's required mount is missing (every run FAILs) or
# there (healthy).
flt_fault() {
	case $1 in
	on) if mountpoint -q "$FLT/mnt"; then umount "$FLT/mnt"; fi ;;
	off) mountpoint -q "$FLT/mnt" || mount -t tmpfs -o size=1m gpuhc-flt-mnt "$FLT/mnt" ;;
	esac
}

# flt_size FILE: its size in bytes, 0 if absent.
flt_size() { stat -c %s "$1" 2>/dev/null || echo 0; }

# flt_run LABEL: one health-check run on gpu001 in the chroot, with only
# what slurmd gives HealthCheckProgram. Its output (also appended to
# runs.gpu001.log after "=== run LABEL"), its new JSON log lines and its
# new events go to last.out, last.log and last.events; "LABEL rc=N MSms"
# to times.txt and last.rc. Safe in the background (it sets no variable).
flt_run() {
	local label=$1 lo eo t0 t1 rc=0 out
	lo=$(flt_size "$FLT/log/$FLT_NODE.jsonl")
	eo=$(flt_size "$FLT/events/$FLT_NODE.jsonl")
	t0=$(date +%s%N)
	out=$(timeout 30 chroot "$BROOT" /usr/bin/env -i SLURMD_NODENAME="$FLT_NODE" PATH=/usr/sbin:/usr/bin:/sbin:/bin \
		"$FLT_IN/gpuhc-healthcheck" --config "$FLT_IN/gpuhc.toml" 2>&1) || rc=$?
	t1=$(date +%s%N)
	printf '%s\n' "$out" >"$FLT/last.out"
	printf '=== run %s\n%s\n' "$label" "$out" >>"$FLT/runs.$FLT_NODE.log"
	tail -c +$((lo + 1)) "$FLT/log/$FLT_NODE.jsonl" >"$FLT/last.log" 2>/dev/null || : >"$FLT/last.log"
	tail -c +$((eo + 1)) "$FLT/events/$FLT_NODE.jsonl" >"$FLT/last.events" 2>/dev/null || : >"$FLT/last.events"
	printf '%s %s\n' "$rc" $(((t1 - t0) / 1000000)) >"$FLT/last.rc"
	printf '%s rc=%s %sms\n' "$label" "$rc" $(((t1 - t0) / 1000000)) >>"$FLT/times.txt"
}

# flt_last: RUN_RC and RUN_MS of the last run.
flt_last() { read -r RUN_RC RUN_MS <"$FLT/last.rc"; }

# flt_in_time RC: the last run exited RC, before the watchdog and without
# its message.
flt_in_time() {
	flt_last
	WHY="rc=$RUN_RC in ${RUN_MS}ms; $(grep -m1 'still running after' "$FLT/last.out" || echo 'no watchdog message')"
	[[ $RUN_RC == "$1" ]] && ((RUN_MS < FLT_WDOG * 1000)) && ! grep -q 'still running after' "$FLT/last.out"
}

# flt_out ERE: the last run printed a line matching ERE.
flt_out() {
	WHY="$(grep -E '^(policy|early)' "$FLT/last.out" | tail -2 | tr '\n' '|')"
	grep -Eq "$1" "$FLT/last.out"
}

# flt_logged JQ: the last run's JSON log has a line matching JQ.
flt_logged() {
	WHY="$(jq -r '"\(.level): \(.msg)\(if .error then " (" + .error + ")" else "" end)"' "$FLT/last.log" 2>&1 | grep -v '^debug' | tail -4 | tr '\n' '|' | head -c 900)"
	jq -e -s "any(.[]; $1)" "$FLT/last.log" >/dev/null 2>&1
}

# flt_no_drain_event: the last run recorded no drain (its events, if any,
# are transitions).
flt_no_drain_event() {
	WHY="events: $(jq -r -s 'map(.kind) | join(",")' "$FLT/last.events" 2>&1)"
	jq -e -s 'all(.[]; .kind != "drain")' "$FLT/last.events" >/dev/null 2>&1
}

# flt_drain_event: the last run recorded its drain (host.mounts).
flt_drain_event() {
	WHY="events: $(jq -r -s 'map(.kind) | join(",")' "$FLT/last.events" 2>&1)"
	jq -e -s 'any(.[]; .kind == "drain" and .check == "host.mounts")' "$FLT/last.events" >/dev/null 2>&1
}

# flt_drained [USER]: gpu001 drained with gpuhc's host.mounts reason (set
# by USER: slurm through REST, root through scontrol).
flt_drained() { wait_node 5 showb "$FLT_NODE" drained "$FLT_PREFIX" "${1:-}"; }
flt_clean() { wait_node 5 showb "$FLT_NODE" clean; }

# flt_heal: the fault goes, and two healthy runs (resume_after = 2) resume
# gpuhc's drain.
flt_heal() {
	flt_fault off
	flt_run "$1 healthy 1"
	flt_run "$1 healthy 2"
}

# flt_resume: an admin's resume, where gpuhc could not keep the drain's
# record.
flt_resume() {
	sb scontrol update NodeName="$FLT_NODE" State=RESUME >/dev/null 2>&1 || true
	wait_node 10 showb "$FLT_NODE" clean || true
}

# flt_fill DIR: DIR's filesystem has no byte left.
flt_fill() {
	dd if=/dev/zero of="$1/.gpuhc-flt-fill" bs=4k status=none 2>/dev/null || true
	WHY="df: $(df -B1 --output=avail "$1" | tail -1) bytes available"
	[[ $(df -B1 --output=avail "$1" | tail -1 | tr -d ' ') == 0 ]]
}

# flt_restd_pid: slurmrestd's pid (the pid file testbed.sh keeps).
flt_restd_pid() {
	local pid
	pid=$(pid_of "slurmrestd$BV") || return 1
	[[ $(cat "/proc/$pid/comm" 2>/dev/null) == slurmrestd ]] || return 1
	echo "$pid"
}

# flt_in_flight: a connection to slurmrestd's port is established (the
# stopped slurmrestd's kernel accepted it; the request waits in it).
flt_in_flight() { [[ -n $(ss -Htn state established "( dport = :$BREST_PORT )" 2>/dev/null) ]]; }

# FLT_SHIFT: jq moving every RFC 3339 time (year 1970 on) by $s seconds;
# Go writes them with a fraction and an offset, which are kept (as UTC).
FLT_SHIFT='def shift($s):
  if type == "string" then
    (capture("^(?<b>[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2})(?<f>\\.[0-9]+)?(?<z>Z|[+-][0-9]{2}:[0-9]{2})$") // null) as $m
    | if $m == null or ($m.b[0:4] | tonumber) < 1970 then . else
      ($m.b | strptime("%Y-%m-%dT%H:%M:%S") | mktime) as $t
      | (if $m.z == "Z" then 0 else ($m.z[1:3] | tonumber) * 3600 + ($m.z[4:6] | tonumber) * 60
         | if $m.z[0:1] == "-" then -. else . end end) as $off
      | ($t - $off + $s | todate | sub("Z$"; ($m.f // "") + "Z"))
    end
  else . end;
walk(shift($s))'

# flt_shift_state SECONDS: every JSON record in the state directory with
# its times moved by SECONDS (in place: mode and owner stay). FLT_SHIFTED
# lists the files changed.
flt_shift_state() {
	local f tmp=$FLT/shift.tmp
	FLT_SHIFTED=
	while IFS= read -r -d '' f; do
		jq -c --argjson s "$1" "$FLT_SHIFT" "$f" >"$tmp" 2>/dev/null || continue
		cmp -s <(jq -c . "$f" 2>/dev/null) "$tmp" && continue
		cat "$tmp" >"$f"
		FLT_SHIFTED+=" ${f#"$FLT/state/$FLT_NODE/"}"
	done < <(find "$FLT/state/$FLT_NODE" -name '*.json' -type f -print0)
	rm -f "$tmp"
}

# flt_future: the policy record's drain time and the history's last run are
# now over 23 hours ahead of the clock.
flt_future() {
	local d h now
	now=$(date +%s)
	d=$(jq -r '.drained.at // empty | sub("\\.[0-9]+"; "") | fromdate' "$FLT/state/$FLT_NODE/policy.$FLT_NODE.json" 2>/dev/null) || d=
	h=$(jq -r '.last_run // empty | sub("\\.[0-9]+"; "") | fromdate' "$FLT/state/$FLT_NODE/history.$FLT_NODE.json" 2>/dev/null) || h=
	WHY="shifted:${FLT_SHIFTED:- nothing}; drained.at ${d:-?}, last_run ${h:-?}, now $now"
	[[ -n $d && -n $h ]] && ((d > now + 82800 && h > now + 82800))
}

# flt_others_idle: gpu002 to gpu004, which run nothing, are idle.
flt_others_idle() {
	local n bad=
	for n in "${BNODES[@]}"; do
		[[ $n == "$FLT_NODE" ]] && continue
		node_is showb "$n" clean || bad+=" $n: $WHY"
	done
	WHY=${bad:-}
	[[ -z $bad ]]
}

# flt_cleanup: daemons back, mounts gone, nodes resumed; safe to repeat.
flt_cleanup() {
	local pid m
	if pid=$(pid_of "slurmrestd$BV" 2>/dev/null) && alive "$pid"; then kill -CONT "$pid" 2>/dev/null || true; fi
	for m in "$FLT/mnt" "$FLT/events" "$FLT/state/$FLT_NODE"; do
		if mountpoint -q "$m"; then umount "$m" 2>/dev/null || umount -l "$m" || true; fi
	done
	for m in "${BNODES[@]}"; do
		sb scontrol update NodeName="$m" State=RESUME >/dev/null 2>&1 || true
	done
}

faults_scenario26() {
	say "faults: Slurm $BL, backend auto, gpu001 run by hand under a ${FLT_LIMIT}s limit: slurmrestd killed, slurmctld stopped, state dir full and read-only, clock stepped back, event log full"
	FLT=$BROOT$FLT_IN FLT_PREFIX="gpuhc: host.mounts: $FLT_IN/mnt:"
	ran "$FLT" "$FLT/events"
	local t0=$SECONDS pid i s
	need_chroot "$BV"
	downb
	rm -rf --one-file-system "$FLT"
	mkdir -p "$FLT"/{state/"$FLT_NODE",log,events,mnt}
	install -m 0755 "$BIN" "$FLT/gpuhc-healthcheck"
	flt_conf
	# No HealthCheckProgram: only the runs made here touch gpu001.
	upb ""
	mount -t tmpfs -o size=256k,mode=0755 gpuhc-flt-state "$FLT/state/$FLT_NODE"
	flt_fault off

	WHY=$(sb "$FLT_IN/gpuhc-healthcheck" --check-config "$FLT_IN/gpuhc.toml" 2>&1)
	expect "$BL (faults): --check-config: limit ${FLT_LIMIT}s gives deadline 2s, Slurm calls until 7s, watchdog ${FLT_WDOG}s" \
		grep -q "HealthCheckTimeout ${FLT_LIMIT}s (\[slurm\] health_check_timeout): deadline 2s, Slurm calls until 7s, watchdog ${FLT_WDOG}s" <<<"$WHY"
	flt_run "baseline healthy"
	expect "$BL (faults): baseline: a healthy run exits 0 in time, 0 Slurm calls, gpu001 idle" \
		eval 'flt_in_time 0 && flt_out "^policy: none \[0 Slurm calls\]" && flt_clean'

	# 1. slurmrestd killed in the middle of a drain.
	say "$BL (faults 1): SIGSTOP slurmrestd, a failing run, SIGKILL slurmrestd while its request is in flight"
	flt_fault on
	if pid=$(flt_restd_pid); then
		kill -STOP "$pid"
		flt_run "1 failing, slurmrestd stopped then killed" &
		s=$!
		WHY="no connection to port $BREST_PORT established within 5s"
		expect "$BL (faults 1): the run's REST request hangs on the stopped slurmrestd (connection established, no answer)" \
			wait_for 5 "a connection to slurmrestd" flt_in_flight
		sleep 0.3
		kill -KILL "$pid" 2>/dev/null || true
		# slurmrestd is this shell's child (testbed.sh's start): reaped
		# here, bash has no "Killed" job notice left to print.
		{ wait "$pid"; } 2>/dev/null || true
		wait "$s" || true
		expect "$BL (faults 1): the run exits 1 within its deadline (watchdog ${FLT_WDOG}s)" flt_in_time 1
		expect "$BL (faults 1): gpu001 drained by the scontrol fallback (reason '$FLT_PREFIX …' set by root)" flt_drained root
		expect "$BL (faults 1): it logs 'slurmrestd failed; falling back to scontrol'" \
			flt_logged '.level == "warning" and .msg == "slurmrestd failed; falling back to scontrol"'
		expect "$BL (faults 1): its policy line says drained via scontrol, and its event log has the drain (backend scontrol)" \
			eval 'flt_out "^policy: drained: .*via scontrol\]" && flt_drain_event && jq -e -s "any(.[]; .kind == \"drain\" and .backend == \"scontrol\")" "$FLT/last.events" >/dev/null'
	else
		fail "$BL (faults 1): no slurmrestd$BV pid to stop ($(cat "$PIDS/slurmrestd$BV.pid" 2>&1))"
	fi
	stop "slurmrestd$BV"
	start_restd_bed "$BV"
	say "$BL (faults 1): slurmrestd restarted"
	flt_heal 1
	expect "$BL (faults 1): after the restart the healed node is resumed through REST (no drain left behind)" \
		eval 'flt_out "^policy: resumed: .*via rest $BREST\]" && flt_clean'

	# 2. slurmctld stopped.
	say "$BL (faults 2): slurmctld stopped"
	stop "slurmctld$BV"
	flt_run "2 healthy, slurmctld down"
	expect "$BL (faults 2): with slurmctld down a healthy run exits 0 in time with 0 Slurm calls" \
		eval 'flt_in_time 0 && flt_out "^policy: none \[0 Slurm calls\]"'
	flt_fault on
	flt_run "2 failing, slurmctld down"
	expect "$BL (faults 2): with slurmctld down the failing run exits 1 within its deadline (watchdog ${FLT_WDOG}s)" flt_in_time 1
	expect "$BL (faults 2): it claims no drain (policy: error, no drain event; the FAIL transition is recorded)" \
		eval 'flt_out "^policy: error: " && ! grep -q "^policy: drained" "$FLT/last.out" && flt_no_drain_event && jq -e -s "any(.[]; .kind == \"transition\" and .check == \"host.mounts\" and .status == \"FAIL\")" "$FLT/last.events" >/dev/null'
	expect "$BL (faults 2): it logs that slurmrestd failed and that the policy could not act (retry next run)" \
		eval 'flt_logged ".msg == \"slurmrestd failed; falling back to scontrol\"" && flt_logged ".level == \"error\" and (.msg | startswith(\"policy could not act\"))"'
	start "slurmctld$BV" "$E2E_DIR/slurmctld$BV.out" chroot "$BROOT" /usr/sbin/slurmctld -D -i
	wait_for 30 "slurmctld $BL ping" sb scontrol ping || { dump_logs_bed "$BV"; die "slurmctld $BL did not come back"; }
	say "$BL (faults 2): slurmctld started again"
	expect "$BL (faults 2): slurmctld back: gpu001 is not drained (the failed run drained nothing)" flt_clean
	flt_run "2 failing, slurmctld back"
	expect "$BL (faults 2): the next failing run drains gpu001 through REST (no lost drain), in time, with a drain event" \
		eval 'flt_in_time 1 && flt_drained slurm && flt_out "^policy: drained: .*via rest $BREST\]" && flt_drain_event'
	flt_heal 2
	expect "$BL (faults 2): healed, gpu001 is resumed by gpuhc" flt_clean

	# 3. The state directory full, then read-only.
	say "$BL (faults 3): state directory full"
	expect "$BL (faults 3): the state directory (256 KiB tmpfs) is full" flt_fill "$FLT/state/$FLT_NODE"
	flt_run "3 healthy, state full"
	expect "$BL (faults 3): state full: a healthy run exits 0 in time and does not drain" \
		eval 'flt_in_time 0 && flt_out "^policy: none \[0 Slurm calls\]" && flt_clean'
	flt_fault on
	flt_run "3 failing, state full"
	expect "$BL (faults 3): state full: the failing run drains gpu001 (REST), exits 1 in time, records the drain" \
		eval 'flt_in_time 1 && flt_drained slurm && flt_drain_event'
	expect "$BL (faults 3): state full: it logs that its state could not be saved (no space left on device), not that it could not act" \
		flt_logged '.level == "error" and (.msg | startswith("policy acted, but its state could not be saved")) and (.error // "" | startswith("policy state not saved: ") and test("no space left on device"))'
	rm -f "$FLT/state/$FLT_NODE/.gpuhc-flt-fill"
	mount -o remount,ro "$FLT/state/$FLT_NODE"
	say "$BL (faults 3): state directory read-only"
	# The drain's record was lost with the full disk: an admin resumes.
	flt_resume
	flt_fault off
	flt_run "3 healthy, state read-only"
	expect "$BL (faults 3): state read-only: a healthy run exits 0 in time and does not drain" \
		eval 'flt_in_time 0 && flt_out "^policy: none \[0 Slurm calls\]" && flt_clean'
	flt_fault on
	flt_run "3 failing, state read-only"
	expect "$BL (faults 3): state read-only: the failing run drains gpu001 (REST), exits 1 in time, records the drain" \
		eval 'flt_in_time 1 && flt_drained slurm && flt_drain_event'
	expect "$BL (faults 3): state read-only: it logs that its state could not be saved (read-only file system), not that it could not act" \
		flt_logged '.level == "error" and (.msg | startswith("policy acted, but its state could not be saved")) and (.error // "" | startswith("policy state not saved: ") and test("read-only file system"))'
	mount -o remount,rw "$FLT/state/$FLT_NODE"
	flt_resume

	# 4. The clock stepped back between runs.
	say "$BL (faults 4): gpuhc's state a day in the future (the clock stepped back)"
	flt_run "4 failing, before the step"
	flt_shift_state 86400
	expect "$BL (faults 4): the state's times are a day ahead (policy drain, history${FLT_SHIFTED:+:$FLT_SHIFTED})" flt_future
	flt_fault off
	flt_run "4 healthy 1, after the step"
	expect "$BL (faults 4): the first healthy run after the step: exit 0 in time, no drain event, gpuhc's drain held (1 of 2)" \
		eval 'flt_in_time 0 && flt_out "^policy: waiting-resume: healthy run 1 of 2" && flt_no_drain_event && flt_drained slurm'
	flt_run "4 healthy 2, after the step"
	expect "$BL (faults 4): the second resumes gpuhc's drain (the record a day ahead is still gpuhc's), exit 0 in time" \
		eval 'flt_in_time 0 && flt_out "^policy: resumed: " && flt_logged "(.msg | startswith(\"resumed: \"))" && flt_no_drain_event && flt_clean'
	flt_shift_state 86400
	flt_run "4 healthy, after a second step"
	expect "$BL (faults 4): a healthy run after a second step: exit 0 in time, 0 Slurm calls, idle" \
		eval 'flt_in_time 0 && flt_out "^policy: none \[0 Slurm calls\]" && flt_clean'
	flt_fault on
	flt_run "4 failing, after the step"
	expect "$BL (faults 4): the failing run after the step drains gpu001 (REST), in time, with a drain event" \
		eval 'flt_in_time 1 && flt_drained slurm && flt_drain_event && flt_out "^policy: drained: " && flt_logged "(.msg | startswith(\"drained: \"))"'
	expect "$BL (faults 4): no run panicked" eval '! grep -Eq "^(panic|fatal error):" "$FLT/runs.$FLT_NODE.log"'
	if grep -qi 'clock' "$FLT/log/$FLT_NODE.jsonl"; then
		say "$BL (faults 4): gpuhc noticed: $(grep -i -m2 'clock' "$FLT/log/$FLT_NODE.jsonl" | jq -r .msg | tr '\n' '|')"
	else
		say "$BL (faults 4): gpuhc logs nothing about the step (the records from the future are simply not trusted)"
	fi
	flt_heal 4
	expect "$BL (faults 4): healed, gpu001 is resumed by gpuhc" flt_clean

	# 5. The event log's disk full.
	say "$BL (faults 5): the event log's filesystem full"
	mount -t tmpfs -o size=64k,mode=0755 gpuhc-flt-events "$FLT/events"
	expect "$BL (faults 5): the event log's directory (64 KiB tmpfs) is full" flt_fill "$FLT/events"
	flt_fault on
	flt_run "5 failing, event log full"
	expect "$BL (faults 5): event log full: the failing run drains gpu001 (REST) and exits 1 in time" \
		eval 'flt_in_time 1 && flt_drained slurm && flt_out "^policy: drained: "'
	expect "$BL (faults 5): event log full: it logs that the event could not be written (no space left on device)" \
		flt_logged '.level == "error" and .msg == "event log" and (.error // "" | test("no space left on device"))'
	flt_heal 5
	expect "$BL (faults 5): event log full: healed, gpu001 is resumed by gpuhc (its state was saved)" flt_clean
	umount "$FLT/events"

	expect "$BL (faults): gpu002, gpu003 and gpu004 stayed idle throughout" flt_others_idle
	i=0
	while read -r s; do say "$BL (faults): run $((++i)): $s"; done <"$FLT/times.txt"
	say "$BL (faults): scenario took $((SECONDS - t0))s"
	flt_cleanup
	downb
}

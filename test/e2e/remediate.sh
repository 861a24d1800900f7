#!/usr/bin/env bash
# Remediation (sourced by run.sh; alone: `GPUHC_E2E_ONLY=remediate
# test/e2e/run.sh`), on the Slurm 24.11 bed, backend "auto" (slurmrestd,
# and the chroot's real /usr/bin/scontrol, which a reboot needs). Every
# slurmd runs gpuhc-healthcheck every 5 s with [remediate] on and a fake
# nvidia-smi (REM_IN/nvidia-smi) that logs its argv and, on a node marked
# curable, clears the node's injected fault: the simulated state, which
# every run reads (--inject @REM_IN/inject.NODE) after remediating. The judge is the
# real slurmctld's node state and the nodes' event logs.
#   gpu001: a healthy simulated DGX H100: never drained, never remediated.
#   gpu003: gpu3 "GPU Reset Required" (NVML recovery action): drained with
#           action reset-gpu, reset (nvidia-smi --gpu-reset -i 0000:5d:00.0),
#           the same run's checks pass, resumed after resume_after runs.
#   gpu002: the same fault, which the reset does not clear: two resets,
#           then an rma drain ("gpuhc: rma: gpu3 (SN ...): gpu.recovery:
#           ...") that stays, with an rma event; gpuhc-drain resume is
#           needed.
#   gpu004: the same fault, max_per_day 1: one reset, then the node stays
#           drained, its reason saying the daily budget held it back.
REM_IN=/srv/gpuhc-rem               # scenario files (inside the chroot)
REM_PCI=0000:5d:00.0                # gpu3 of the simulated DGX H100
REM_MSG="GPU recovery action: GPU Reset Required [simulated]"
# Every simulated DGX H100 has the same serials; each node's gpu3 gets its
# own (gpu002's 1654922002003), as real GPUs have.
rem_sn() { echo "165492200${1: -1}003"; }
rem_fault() { echo "gpu3 (SN $(rem_sn "$1"), $REM_PCI)"; }

# --inject @FILE reads the faults when the run builds its simulated GPUs,
# after remediation: a reset that clears the file is seen by the same
# run's checks, as a real reset is.
REM_SIM='SIM="--simulate dgxh100 --inject @'"$REM_IN"'/inject.$SLURMD_NODENAME"'

write_rem_conf() {
	{
		# Three nodes fail at once here: the storm guard (10 % of 4 nodes:
		# one drain) is off, the remediation budget is what is tested.
		conf_head "$REM_IN" "remediation (Slurm $BL chroot)" /usr/bin/scontrol |
			sed 's/^storm_jitter = .*/&\nmax_drained_fraction = 0.0/'
		cat <<EOF

[remediate]
enabled = true
nvidia_smi = "$REM_IN/nvidia-smi"
reset_timeout = "5s"
max_per_day = 3
rma_after = 2

[[host]]
match = "gpu004"
[host.remediate]
max_per_day = 1
rma_after = 3
EOF
	} >"$REM/gpuhc.toml.tmp"
	mv "$REM/gpuhc.toml.tmp" "$REM/gpuhc.toml"
}

# The fake nvidia-smi: gpuhc runs it with argv only, in the health
# check's environment (slurmd's SLURMD_NODENAME).
write_fake_smi() {
	cat >"$REM/nvidia-smi" <<EOF
#!/bin/sh
echo "\$SLURMD_NODENAME \$*" >>$REM_IN/nvidia-smi.log
[ "\$1" = --gpu-reset ] || { echo "fake nvidia-smi: only --gpu-reset" >&2; exit 2; }
[ -e $REM_IN/curable.\$SLURMD_NODENAME ] && sed -i /recovery=/d $REM_IN/inject.\$SLURMD_NODENAME
echo "GPU 00000000:5D:00.0 was successfully reset."
EOF
	chmod 0755 "$REM/nvidia-smi"
}

# rem_events NODE [JQ-ARGS...] FILTER: FILTER (over the node's whole
# event log, slurped) holds; rem_events_in DIR NODE ... the same in DIR.
rem_events() { rem_events_in "$REM" "$@"; }
rem_events_in() {
	local dir=$1 node=$2; shift 2
	WHY="$(tail -c 1500 "$dir/log/$node.events.jsonl" 2>&1)"
	jq -e -s "$@" "$dir/log/$node.events.jsonl" >/dev/null 2>&1
}

# wait_rem_events TIMEOUT NODE [JQ-ARGS...] FILTER (in REM, or RB while
# the reboot loop runs)
wait_rem_events() {
	local end=$((SECONDS + $1)); shift
	until rem_events_in "${REM_DIR:-$REM}" "$@"; do
		((SECONDS < end)) || return 1
		sleep 0.5
	done
}

# rem_reason_has NODE TEXT: the node's reason contains TEXT.
rem_reason_has() {
	local r
	r=$(reason_of "$(showb "$1")")
	WHY="reason '$r'"
	[[ $r == *"$2"* ]]
}

remediate_scenario24() {
	use_bed_run 24
	REM=$BROOT$REM_IN
	say "remediation: Slurm $BL chroot, reset-gpu, escalation to rma, the daily budget"
	ran "$REM"
	need_chroot "$BV"
	downb
	rm -rf --one-file-system "$REM"
	mkdir -p "$REM"/{state,log}
	install -m 0755 "$BIN" "$REM/gpuhc-healthcheck"
	install -m 0755 "$DRAIN_BIN" "$REM/gpuhc-drain"
	hc_wrapper "$REM/healthcheck.sh" "$REM_IN/gpuhc-healthcheck" "$REM_IN/gpuhc.toml" "$REM_IN" "$REM_SIM" '$SIM'
	write_rem_conf
	write_fake_smi
	local n
	for n in gpu002 gpu003 gpu004; do
		printf 'gpu3:serial=%s\ngpu3:recovery=reset\n' "$(rem_sn $n)" >"$REM/inject.$n"
	done
	touch "$REM/curable.gpu003"

	upb "$(hc_conf "$REM_IN/healthcheck.sh")"
	expect "$BL (rem): --check-config accepts the remediation config" \
		sb "$REM_IN/gpuhc-healthcheck" --check-config "$REM_IN/gpuhc.toml"
	touch "$REM/armed"

	# gpu003: drained, reset, judged healthy by the same run, resumed.
	expect "$BL (rem): gpu003 drained for gpu.recovery with action reset-gpu" \
		wait_rem_events "$WAIT" gpu003 '[.[] | select(.kind == "drain" and .action == "reset-gpu" and .check == "gpu.recovery")] | length == 1'
	expect "$BL (rem): gpu003 reset: remediation-started then -finished (action reset-gpu, serial, PCI, seconds)" \
		wait_rem_events "$WAIT" gpu003 --arg sn "$(rem_sn gpu003)" --arg pci "$REM_PCI" \
		'([.[] | select(.kind == "remediation-started" and .action == "reset-gpu" and .serial == $sn and .pci == $pci)] | length == 1) and ([.[] | select(.kind == "remediation-finished" and .action == "reset-gpu" and (.seconds | type == "number"))] | length == 1)'
	WHY="$(grep gpu003 "$REM/nvidia-smi.log" 2>&1)"
	expect "$BL (rem): gpu003's nvidia-smi ran as 'nvidia-smi --gpu-reset -i $REM_PCI', once" \
		[ "$(grep -c "^gpu003 --gpu-reset -i $REM_PCI\$" "$REM/nvidia-smi.log" 2>/dev/null)" = 1 ]
	expect "$BL (rem): gpu003 back in service (idle, not drained) within ${WAIT}s, no person involved" \
		wait_node "$WAIT" showb gpu003 clean
	expect "$BL (rem): gpu003's events in order: drain, remediation-started, remediation-finished, resume" \
		rem_events gpu003 '[.[] | select(.kind | test("^(drain|remediation-.*|resume)$")) | .kind] == ["drain", "remediation-started", "remediation-finished", "resume"]'

	# gpu002: the reset does not cure it: two remediations, then rma.
	expect "$BL (rem): gpu002 drained as rma after 2 resets: 'gpuhc: rma: $(rem_fault gpu002): gpu.recovery: …'" \
		wait_node $((WAIT * 4)) showb gpu002 drained "gpuhc: rma: $(rem_fault gpu002): gpu.recovery: $REM_MSG"
	expect "$BL (rem): gpu002's event log: 2 remediations, then an rma event (remediations 2, serial, PCI, model, driver)" \
		wait_rem_events 10 gpu002 --arg sn "$(rem_sn gpu002)" \
		'([.[] | select(.kind == "remediation-started")] | length == 2) and ([.[] | select(.kind == "rma" and .remediations == 2 and .serial == $sn and .pci != null and .model != null and .driver != null)] | length == 1)'
	expect "$BL (rem): the rma drain stays over 3 runs, even once the fault is gone" \
		eval 'rm -f "$REM/inject.gpu002"; stays showb gpu002 "$REM" 3 drained "gpuhc: rma: "'
	WHY="$(grep -c "^gpu002 " "$REM/nvidia-smi.log" 2>&1)"
	expect "$BL (rem): gpu002 was reset exactly twice" [ "$(grep -c "^gpu002 " "$REM/nvidia-smi.log")" = 2 ]
	sb "$REM_IN/gpuhc-drain" rma --events "$REM_IN/log/*.events.jsonl" >"$REM/rma.txt" 2>&1 || true
	WHY="$(cat "$REM/rma.txt")"
	expect "$BL (rem): gpuhc-drain rma lists gpu002's gpu3 alone: serial, PCI, model, driver, 2 remediations tried" \
		eval 'sb "$REM_IN/gpuhc-drain" rma --events "$REM_IN/log/*.events.jsonl" --json | jq -e --arg sn "$(rem_sn gpu002)" --arg pci "$REM_PCI" \
			"length == 1 and .[0].node == \"gpu002\" and .[0].serial == \$sn and .[0].pci == \$pci and (.[0].model | length > 0) and (.[0].driver | length > 0) and .[0].remediations == 2 and ([.[0].remediations_tried[] | select(.outcome == \"finished\")] | length == 2)" >/dev/null'

	# gpu004: one reset a day.
	expect "$BL (rem): gpu004 held back by its daily budget: reason ends '[not remediated: daily budget spent (max_per_day 1)]'" \
		wait_for $((WAIT * 4)) "gpu004 held by its daily budget" rem_reason_has gpu004 "[not remediated: daily budget spent (max_per_day 1)]"
	expect "$BL (rem): gpu004 stays drained, with one reset, over 2 more runs" \
		eval 'stays showb gpu004 "$REM" 2 drained "gpuhc: gpu.recovery: $(rem_fault gpu004)" && [ "$(grep -c "^gpu004 " "$REM/nvidia-smi.log")" = 1 ]'

	# The cluster budget (max_fraction 0.05 of 4 nodes: 1 at once): the
	# three nodes failed together, so two waited their turn.
	WHY="$(grep -h "remediate: held" "$REM"/runs.gpu00[234].log 2>&1 | sort | uniq -c | head -5)"
	expect "$BL (rem): nodes failing together were held back by the cluster budget, the reason saying so ('cluster budget spent (1 at once)')" \
		grep -q "remediate: held: remediation held back: cluster budget spent (1 at once)" "$REM"/runs.gpu00[234].log

	# gpu001: healthy all along.
	expect "$BL (rem): gpu001 (healthy) was never drained nor remediated" \
		eval 'node_is showb gpu001 clean && ! grep -q "^gpu001 " "$REM/nvidia-smi.log" && ! grep -q "remediat" "$REM/runs.gpu001.log"'

	rm -f "$REM/armed"
	for n in "${BNODES[@]}"; do
		sb scontrol update NodeName="$n" State=RESUME >/dev/null 2>&1 || true
	done
	downb
}

# ------------------------------------------------------------ the reboot loop
# The reboot loop on the 24.11 bed: RebootProgram is test/e2e/reboot.sh
# (testbed.sh reboot_conf), which restarts the node's slurmd with -b under
# a new boot id; every health check runs under `reboot.sh exec`, which
# shows gpuhc that boot id at /proc/sys/kernel/random/boot_id. gpu003
# simulates a DGX H100 with XID 79 on gpu3 (NVIDIA: GPU has fallen off the
# bus, restart the machine) until its first reboot; gpu001 a healthy one.
# A job submitted for gpu003 while it is drained must wait until gpuhc
# resumes it after the boot.
RB_IN=/srv/gpuhc-rb                 # scenario files (inside the chroot)
RB_REASON="gpuhc: gpu.xid: gpu3 (SN 1654922000003, 0000:5d:00.0): XID 79 GPU has fallen off the bus [simulated]"
RB_ASKED="gpuhc: reboot: gpu3 (SN 1654922000003, 0000:5d:00.0): gpu.xid: XID 79 GPU has fallen off the bus [simulated]"

# Until a node's first simulated reboot it has no boot id file of its own.
RB_SIM='if [ -s '"$S24_IN"'/boot/$SLURMD_NODENAME ] || [ "$SLURMD_NODENAME" != gpu003 ]; then SIM="--simulate dgxh100"; else SIM="--simulate dgxh100 --inject gpu3:xid=79"; fi'

# rb_time NODE FILTER: the time (epoch seconds) of the first event FILTER
# selects in NODE's event log.
rb_time() {
	jq -r -s "[.[] | select($2)][0].time // empty | sub(\"\\\\.[0-9]+Z$\"; \"Z\") | fromdate" "$RB/log/$1.events.jsonl" 2>/dev/null
}

# rb_in_order T...: every T is set and none is before the one before it.
rb_in_order() {
	local prev=0 t
	for t in "$@"; do
		[[ -n $t ]] && ((t >= prev)) || return 1
		prev=$t
	done
}

reboot_scenario24() {
	use_bed_run 24
	RB=$BROOT$RB_IN
	local REM_DIR=$RB
	say "remediation: the reboot loop on Slurm $BL (RebootProgram restarts slurmd -b with a new boot id)"
	ran "$RB"
	need_chroot "$BV"
	downb
	rm -rf --one-file-system "$RB"
	mkdir -p "$RB"/{state,log}
	install -m 0755 "$BIN" "$RB/gpuhc-healthcheck"
	hc_wrapper "$RB/healthcheck.sh" "$(reboot_exec) $RB_IN/gpuhc-healthcheck" "$RB_IN/gpuhc.toml" "$RB_IN" "$RB_SIM" '$SIM'
	{
		conf_head "$RB_IN" "reboot loop (Slurm $BL chroot)" /usr/bin/scontrol
		printf '\n[remediate]\nenabled = true\nactions = ["reboot"]\n'
	} >"$RB/gpuhc.toml"
	upb "$(hc_conf "$RB_IN/healthcheck.sh")"$'\n'"$(reboot_conf)"
	expect "$BL (reboot): --check-config accepts the reboot-loop config" \
		sb "$RB_IN/gpuhc-healthcheck" --check-config "$RB_IN/gpuhc.toml"
	touch "$RB/armed"

	expect "$BL (reboot): gpu003 drained for XID 79 (action reboot) within ${WAIT}s" \
		wait_node "$WAIT" showb gpu003 drained "$RB_REASON"
	local job start fin res boot
	job=$(sb sbatch --parsable -w gpu003 -o /dev/null --wrap "date +%s.%N >$RB_IN/job.start" 2>&1) || true
	WHY="sbatch: $job"
	expect "$BL (reboot): a job for gpu003 is submitted while it is drained" grep -qE '^[0-9]+$' <<<"$job"
	expect "$BL (reboot): gpuhc asked Slurm for the reboot: remediation-started, action reboot, 'scontrol reboot Reason=$RB_ASKED gpu003'" \
		wait_rem_events "$WAIT" gpu003 --arg m "scontrol reboot Reason=$RB_ASKED gpu003" \
		'[.[] | select(.kind == "remediation-started" and .action == "reboot" and .message == $m)] | length == 1'
	expect "$BL (reboot): the RebootProgram rebooted gpu003 once (slurmd -b, a new boot id)" \
		wait_reboots_b 60 gpu003 1
	boot=$(boot_id_b gpu003)
	expect "$BL (reboot): the first run in the new boot recorded the reboot finished (boot id $boot, seconds)" \
		wait_rem_events "$WAIT" gpu003 --arg b "$boot" \
		'[.[] | select(.kind == "remediation-finished" and .action == "reboot" and .boot_id == $b and (.seconds | type == "number"))] | length == 1'
	expect "$BL (reboot): gpu003 back in service, idle, within $((WAIT * 2))s of the reboot: no person involved" \
		wait_node $((WAIT * 2)) showb gpu003 clean
	expect "$BL (reboot): gpu003's events in order: drain, remediation-started, remediation-finished, resume" \
		rem_events_in "$RB" gpu003 '[.[] | select(.kind | test("^(drain|remediation-.*|resume)$")) | .kind] == ["drain", "remediation-started", "remediation-finished", "resume"]'
	wait_for 30 "the job for gpu003 ran" test -s "$RB/job.start" || true
	start=$(cut -d. -f1 "$RB/job.start" 2>/dev/null)
	fin=$(rb_time gpu003 '.kind == "remediation-finished"')
	res=$(rb_time gpu003 '.kind == "resume"')
	WHY="job started at ${start:-never}, reboot recorded finished at ${fin:-?}, resumed at ${res:-?}"
	expect "$BL (reboot): the job waiting for gpu003 started only after gpuhc resumed it (after the post-boot checks passed)" \
		rb_in_order "$fin" "$res" "$start"
	WHY="gpu001 reboots: $(reboots_b gpu001)"
	expect "$BL (reboot): gpu001 (healthy) was never drained nor rebooted" \
		eval 'node_is showb gpu001 clean && [ "$(reboots_b gpu001)" = 0 ]'

	rm -f "$RB/armed"
	sb scancel --quiet "$job" 2>/dev/null || true
	for n in "${BNODES[@]}"; do
		sb scontrol update NodeName="$n" State=RESUME >/dev/null 2>&1 || true
	done
	downb
}

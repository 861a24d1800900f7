#!/usr/bin/env bash
# Scenario 6 (sourced by run.sh): real kernel lines, replayed with
# --kernel-log, judged by gpu.xid, fabric.sxid and host.kernel under real
# Slurm, on the bed use_bed_run chose (24.11 or 26.05; HealthCheckProgram,
# REST only). HC6_IN and HC6 come from run.sh.
#
# Every line comes from the evidence corpus
# (testdata/evidence/kernel/corpus.jsonl): lines pasted in public bug
# reports, each with its source and the verdict NVIDIA's or the kernel's
# documentation gives it. Each node replays one of them, written as `dmesg`
# prints it, on a simulated DGX H100:
#   gpu001  XID 145 Nonfatal (NVLink5; the catalogue says IGNORE)  -> idle
#   gpu002  XID 154 "Node Reboot Required"                         -> drained, action reboot
#   gpu003  a fatal NVSwitch SXid                                  -> drained
#   gpu004  a PCIe AER "Uncorrected (Fatal)" error                 -> drained
HC6_IN=/srv/gpuhc-hc6               # scenario 6 files (inside the chroot)
CORPUS=$REPO/testdata/evidence/kernel/corpus.jsonl

SIM6_ARGS="SIM=\"--simulate dgxh100 --kernel-log $HC6_IN/kmsg/\$SLURMD_NODENAME.log\""

# corpus_pick JQ: the text of the first corpus item (non-synthetic first)
# matching JQ, empty if none; its id and source go to the log.
corpus_pick() {
	local item
	item=$(jq -c -s "[.[] | select($1)] | sort_by(.synthetic) | first // empty" "$CORPUS")
	[[ -n $item ]] || return 0
	say "$BL (6): replaying $(jq -r '"\(.id) (\(if .synthetic then "synthetic" else .source end))"' <<<"$item")" >&2
	jq -r .text <<<"$item"
}

# write_kmsg6 NODE TEXT: NODE's replayed log, in dmesg's format, after a few
# healthy boot lines.
write_kmsg6() {
	mkdir -p "$HC6/kmsg"
	{
		echo '[    0.000000] Linux version 5.15.0-1042-nvidia (buildd@lcy02-amd64-089) #42-Ubuntu SMP'
		echo '[   21.601122] nvidia-nvlink: Nvlink Core is being initialized, major device number 508'
		echo '[   21.712044] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024'
		printf '[  219.470123] %s\n' "$2"
	} >"$HC6/kmsg/$1.log"
}

# write_conf_6: the usual head, with the storm guard lifted: three of the
# four nodes are meant to drain.
write_conf_6() {
	conf_head "$HC6_IN" "scenario 6 (Slurm $BL chroot, real kernel lines replayed, REST only)" |
		sed '/^storm_jitter = /a max_drained_fraction = 1.0' >"$HC6/gpuhc.toml.tmp"
	mv "$HC6/gpuhc.toml.tmp" "$HC6/gpuhc.toml"
}

# event6 NODE JQ: NODE's event log has an event matching JQ
event6() {
	WHY="$(tail -3 "$HC6/log/$1.events.jsonl" 2>&1 | head -c 800)"
	jq -e -s "[.[] | select($2)] | length > 0" "$HC6/log/$1.events.jsonl" >/dev/null 2>&1
}

scenario6() {
	say "scenario 6: Slurm $BL chroot, real kernel lines replayed with --kernel-log: XID 145 Nonfatal, XID 154 reboot, SXid fatal, AER fatal"
	ran "$HC6" "$HC6/kmsg"
	local l145 l154 lsxid laer n line r
	[[ -f $CORPUS ]] || { fail "$BL (6): $CORPUS missing"; return; }
	l145=$(corpus_pick '.check == "gpu.xid" and .status == "OK" and (.text | test("\\): 145, .*Nonfatal"))')
	l154=$(corpus_pick '.check == "gpu.xid" and .action == "reboot" and (.text | test("\\): 154, .*Node Reboot Required"))')
	lsxid=$(corpus_pick '.check == "fabric.sxid" and .status == "FAIL"')
	laer=$(corpus_pick '.check == "host.kernel" and .status == "FAIL" and (.text | test("PCIe Bus Error: severity=Uncorrect[a-z]* \\(Fatal\\)"))')
	for v in l145 l154 lsxid laer; do
		[[ -n ${!v} ]] || { fail "$BL (6): the corpus has no line for $v"; return; }
	done
	need_chroot "$BV"
	downb
	rm -rf --one-file-system "$HC6"
	mkdir -p "$HC6"/{state,log}
	install -m 0755 "$BIN" "$HC6/gpuhc-healthcheck"
	write_kmsg6 gpu001 "$l145"
	write_kmsg6 gpu002 "$l154"
	write_kmsg6 gpu003 "$lsxid"
	write_kmsg6 gpu004 "$laer"
	hc_wrapper "$HC6/healthcheck.sh" "$HC6_IN/gpuhc-healthcheck" "$HC6_IN/gpuhc.toml" "$HC6_IN" \
		"$SIM6_ARGS" '$SIM'
	write_conf_6

	upb "$(hc_conf "$HC6_IN/healthcheck.sh")"
	expect "$BL (6): --check-config accepts the scenario 6 config (in the chroot)" \
		sb "$HC6_IN/gpuhc-healthcheck" --check-config "$HC6_IN/gpuhc.toml"
	WHY=$(sb "$HC6_IN/gpuhc-healthcheck" --config "$HC6_IN/gpuhc.toml" --node gpu002 --dry-run --simulate dgxh100 \
		--kernel-log "$HC6_IN/kmsg/gpu002.log" 2>&1 | tail -5) || true
	expect "$BL (6): a dry run of gpu002's log says it would drain for XID 154, changing nothing" \
		grep -q 'gpu.xid.*154' <<<"$WHY"
	touch "$HC6/armed"
	say "$BL (6): armed"

	expect "$BL (6): gpu002 (XID 154 Node Reboot Required) drained through REST within ${WAIT}s" \
		wait_node "$WAIT" showb gpu002 drained "gpuhc: gpu.xid: " slurm
	line=$(showb gpu002); r=$(reason_of "$line")
	WHY="reason '$r'"
	expect "$BL (6): gpu002's reason names XID 154" grep -q 'XID 154' <<<"$r"
	expect "$BL (6): gpu002's event log has the drain with action reboot" \
		wait_for 10 "gpu002's drain event" event6 gpu002 '.kind == "drain" and .action == "reboot"'
	expect "$BL (6): gpu003 (fatal NVSwitch SXid) drained through REST within ${WAIT}s" \
		wait_node "$WAIT" showb gpu003 drained "gpuhc: fabric.sxid: " slurm
	expect "$BL (6): gpu004 (AER Uncorrected (Fatal)) drained through REST within ${WAIT}s" \
		wait_node "$WAIT" showb gpu004 drained "gpuhc: host.kernel: " slurm
	expect "$BL (6): gpu001 (XID 145 Nonfatal) stays idle over 3 runs" stays showb gpu001 "$HC6" 3 clean
	WHY="last: $(last_policy "$HC6" gpu001)"
	expect "$BL (6): gpu001's runs make no Slurm call and never drain" \
		eval 'last_policy "$HC6" gpu001 | grep -q "^policy: none \[0 Slurm calls\]" && ! grep -q "^policy: drain" "$HC6/runs.gpu001.log"'
	expect "$BL (6): the kernel-log drains stay over 2 more runs (sticky for the boot)" \
		eval 'stays showb gpu002 "$HC6" 2 drained "gpuhc: gpu.xid: " slurm && node_is showb gpu003 drained "gpuhc: fabric.sxid: " && node_is showb gpu004 drained "gpuhc: host.kernel: "'

	rm -f "$HC6/armed"
	for n in "${BNODES[@]}"; do
		sb scontrol update NodeName="$n" State=RESUME >/dev/null 2>&1 || true
	done
	downb
}

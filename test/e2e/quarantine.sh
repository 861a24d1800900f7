#!/usr/bin/env bash
# Lemon quarantine (sourced by run.sh; alone: `GPUHC_E2E_ONLY=quarantine
# test/e2e/run.sh`), on the 24.11 and 26.05 beds: an event log written by
# hand makes gpu002 a lemon (4 gpu.xid episodes in 10 days, the other
# nodes none, every node 240 h of heartbeats); gpuhc-drain lemons ranks
# it, --apply raises its Weight in the real slurmctld (scontrol show node
# is the judge) and records quarantine-applied with the original, a second
# --apply changes nothing, --revert brings the original weight back and
# records quarantine-reverted. A weight an admin changed is refused
# without --force, both ways. Rounds: REST (weight), REST with --feature
# gpuhc_lemon, and backend scontrol (weight and feature).
QZ_IN=/srv/gpuhc-qz                 # scenario files (inside the chroot)

# qz_conf BACKEND: the scenario config (conf_head: REST, scontrol fallback)
qz_conf() {
	conf_head "$QZ_IN" "lemon quarantine (Slurm $BL chroot, backend $1)" /usr/bin/scontrol |
		sed "s|^backend = \"auto\"|backend = \"$1\"|" >"$QZ/gpuhc-$1.toml"
}

# qz_events: 240 h of heartbeats on every node (10 of 24 h), and four
# gpu.xid FAIL→OK episodes of gpu3 on gpu002.
qz_events() {
	local n d t serial=1654922000003
	for n in "${BNODES[@]}"; do
		for d in $(seq 10 -1 1); do
			t=$(date -u -d "-$d days" +%Y-%m-%dT%H:%M:%SZ)
			printf '{"time":"%s","kind":"heartbeat","node":"%s","hours":24,"by":"healthcheck","job_id":"","boot_id":""}\n' "$t" "$n"
		done >>"$QZ/log/$n.events.jsonl"
	done
	for d in 9 7 5 3; do
		t=$(date -u -d "-$d days" +%Y-%m-%dT%H:%M:%SZ)
		printf '{"time":"%s","kind":"transition","node":"gpu002","check":"gpu.xid","component":"gpu3","serial":"%s","status":"FAIL","previous":"OK","message":"XID 79 GPU has fallen off the bus","by":"healthcheck","job_id":"","boot_id":""}\n' "$t" "$serial"
		t=$(date -u -d "-$d days +1 hour" +%Y-%m-%dT%H:%M:%SZ)
		printf '{"time":"%s","kind":"transition","node":"gpu002","check":"gpu.xid","component":"gpu3","serial":"%s","status":"OK","previous":"FAIL","by":"healthcheck","job_id":"","boot_id":""}\n' "$t" "$serial"
	done >>"$QZ/log/gpu002.events.jsonl"
}

# qz BACKEND ARGS...: gpuhc-drain lemons in the chroot; output in $QZ/out.txt,
# exit status in QRC.
qz() {
	local be=$1
	shift
	QRC=0
	sb "$QZ_IN/gpuhc-drain" lemons "$@" --config "$QZ_IN/gpuhc-$be.toml" >"$QZ/out.txt" 2>&1 || QRC=$?
	WHY="exit $QRC: $(head -c 1500 "$QZ/out.txt")"
}

# weight_of NODE / features_of NODE: from scontrol show node
weight_of() { showb "$1" | sed -n 's/.* Weight=\([0-9]*\) .*/\1/p'; }
active_of() { showb "$1" | sed -n 's/.* ActiveFeatures=\([^ ]*\) .*/\1/p'; }
avail_of() { showb "$1" | sed -n 's/.* AvailableFeatures=\([^ ]*\) .*/\1/p'; }

# qz_count KIND: quarantine events of that kind in gpu002's log
qz_count() { jq -s --arg k "$1" '[.[] | select(.kind == $k)] | length' "$QZ/log/gpu002.events.jsonl"; }

# qz_last_has JQ: the last quarantine event of gpu002 matches JQ
qz_last_has() {
	WHY="$(grep quarantine "$QZ/log/gpu002.events.jsonl" | tail -1)"
	jq -e -s "[.[] | select(.kind | startswith(\"quarantine\"))] | last | $1" "$QZ/log/gpu002.events.jsonl" >/dev/null
}

# qz_round BACKEND FEATURE: apply, apply again, admin change refused, revert
qz_round() {
	local be=$1 feat=$2 tag fargs=() applied="weight=1000"
	tag="$BL (quarantine, $be${feat:+, --feature $feat})"
	if [[ -n $feat ]]; then
		fargs=(--feature "$feat")
		applied="weight=1000 features=$feat active_features=$feat"
	fi
	local na nr
	na=$(qz_count quarantine-applied) nr=$(qz_count quarantine-reverted)

	qz "$be" --apply --dry-run "${fargs[@]}"
	expect "$tag: --apply --dry-run would apply to gpu002 and changes nothing" \
		eval '[ "$QRC" = 0 ] && grep -q "^gpu002 *would-apply *weight=1 " "$QZ/out.txt" && [ "$(weight_of gpu002)" = 1 ]'

	qz "$be" --apply "${fargs[@]}"
	say "$tag: --apply:"; cat "$QZ/out.txt"
	expect "$tag: --apply exits 0 and quarantines gpu002 only" \
		eval '[ "$QRC" = 0 ] && grep -q "^gpu002 *applied " "$QZ/out.txt" && [ "$(grep -c applied "$QZ/out.txt")" = 1 ]'
	WHY="$(showb gpu002)"
	expect "$tag: scontrol show node gpu002 has Weight=1000" [ "$(weight_of gpu002)" = 1000 ]
	if [[ -n $feat ]]; then
		expect "$tag: gpu002's AvailableFeatures and ActiveFeatures are $feat" \
			eval '[ "$(avail_of gpu002)" = "$feat" ] && [ "$(active_of gpu002)" = "$feat" ]'
	fi
	WHY="$(showb gpu001)"
	expect "$tag: gpu001 (no lemon) keeps Weight=1" [ "$(weight_of gpu001)" = 1 ]
	expect "$tag: quarantine-applied recorded with original weight=1, applied $applied, by gpuhc-drain:" \
		qz_last_has ".kind == \"quarantine-applied\" and .node == \"gpu002\" and (.original | startswith(\"weight=1\")) and .applied == \"$applied\" and (.by | startswith(\"gpuhc-drain:\"))"
	local want_be="rest $BREST"
	[[ $be == scontrol ]] && want_be=scontrol
	expect "$tag: the change went through $want_be" qz_last_has ".backend == \"$want_be\""


	qz "$be" --apply "${fargs[@]}"
	expect "$tag: a second --apply is already-applied and records nothing" \
		eval '[ "$QRC" = 0 ] && grep -q "^gpu002 *already-applied" "$QZ/out.txt" && [ "$(qz_count quarantine-applied)" = $((na + 1)) ]'

	sb scontrol update NodeName=gpu002 Weight=7
	qz "$be" --revert
	expect "$tag: --revert refuses gpu002 after an admin set Weight=7 (exit 1), weight stays 7" \
		eval '[ "$QRC" = 1 ] && grep -q "^gpu002 *refused.*changed since" "$QZ/out.txt" && [ "$(weight_of gpu002)" = 7 ]'
	sb scontrol update NodeName=gpu002 Weight=1000

	qz "$be" --revert
	say "$tag: --revert:"; cat "$QZ/out.txt"
	WHY="$WHY; $(showb gpu002)"
	expect "$tag: --revert exits 0 and scontrol show node gpu002 has Weight=1 again" \
		eval '[ "$QRC" = 0 ] && grep -q "^gpu002 *reverted" "$QZ/out.txt" && [ "$(weight_of gpu002)" = 1 ]'
	if [[ -n $feat ]]; then
		WHY="$(showb gpu002)"
		# A cleared list shows as "(null)" or empty (ActiveFeatures=, 26.05.5).
		expect "$tag: gpu002's features are back to none" \
			eval 'case "$(avail_of gpu002)/$(active_of gpu002)" in "(null)/(null)" | "(null)/" | "/") true ;; *) false ;; esac'
	fi
	expect "$tag: quarantine-reverted recorded (original $applied, applied weight=1…)" \
		qz_last_has ".kind == \"quarantine-reverted\" and .original == \"$applied\" and (.applied | startswith(\"weight=1\"))"
	qz "$be" --revert
	expect "$tag: a second --revert has nothing to do and records nothing" \
		eval '[ "$QRC" = 0 ] && [ "$(qz_count quarantine-reverted)" = $((nr + 1)) ]'
}

quarantine_scenario() {
	say "quarantine: Slurm $BL chroot, gpuhc-drain lemons --apply/--revert (Weight, features)"
	QZ=$BROOT$QZ_IN
	ran "$QZ"
	[[ -x $DRAIN_BIN ]] || { fail "$BL (quarantine): $DRAIN_BIN missing; run make build"; return; }
	need_chroot "$BV"
	downb
	rm -rf --one-file-system "$QZ"
	mkdir -p "$QZ"/{state,log}
	install -m 0755 "$DRAIN_BIN" "$QZ/gpuhc-drain"
	qz_conf auto
	qz_conf scontrol
	qz_events
	upb ""

	WHY="$(showb gpu002)"
	expect "$BL (quarantine): gpu002 starts with Weight=1, no features" \
		eval '[ "$(weight_of gpu002)" = 1 ] && [ "$(active_of gpu002)" = "(null)" ]'
	qz auto --json --window 30d
	expect "$BL (quarantine): lemons --json ranks gpu002 first (4 episodes, 4x the fleet's node MTTF) and GPU 1654922000003" \
		jq -e '.lemons[0].kind == "node" and .lemons[0].key == "gpu002" and .lemons[0].episodes == 4 and (.lemons[0].x_fleet | . > 3.99 and . < 4.01) and ([.lemons[] | select(.kind == "gpu") | .key] == ["1654922000003"])' "$QZ/out.txt"
	qz auto
	say "$BL (quarantine): gpuhc-drain lemons:"; cat "$QZ/out.txt"
	qz auto --csv
	expect "$BL (quarantine): lemons --csv has a header and 2 rows" [ "$(wc -l <"$QZ/out.txt")" = 3 ]

	# An admin's weight is not the default: --apply refuses it.
	sb scontrol update NodeName=gpu002 Weight=5
	qz auto --apply
	expect "$BL (quarantine): --apply refuses gpu002 with an admin's Weight=5 (exit 1), weight stays 5" \
		eval '[ "$QRC" = 1 ] && grep -q "^gpu002 *refused.*weight 5 is not 1" "$QZ/out.txt" && [ "$(weight_of gpu002)" = 5 ] && [ "$(qz_count quarantine-applied)" = 0 ]'
	sb scontrol update NodeName=gpu002 Weight=1

	qz_round auto ""
	qz_round auto gpuhc_lemon
	qz_round scontrol gpuhc_lemon
	downb
}

#!/usr/bin/env bash
# Record real slurmrestd and scontrol responses from the test bed into
# internal/slurm/testdata/{rest,scontrol}/<release>/ (see the README there).
#
#   bash test/e2e/record-fixtures.sh            # all three beds, one after the other
#   bash test/e2e/record-fixtures.sh 26         # only Slurm 26.05 (or 22, 24; several allowed)
#   KEEP=1 bash test/e2e/record-fixtures.sh 26  # leave the test beds running
#   GPUHC_FIXTURES_ONLY=jobs bash test/e2e/record-fixtures.sh 24 26
#                                               # only the job-update cases
#
# Each bed is brought up for its recording and torn down after it.
# REST bodies are stored byte-exact as received, one file per case named
# <case>.<http status>.json (an empty body gives an empty file).
# scontrol cases are stored as <case>.txt (stdout), <case>.stderr.txt and
# <case>.exit (the exit status).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
# shellcheck source=testbed.sh
source "$HERE/testbed.sh"

OUT=${GPUHC_FIXTURES_OUT:-$REPO/internal/slurm/testdata}
REASON='gpuhc: host.mounts: /scratch: not mounted'
FOREIGN='maintenance'
DOWNREASON='gpuhc-e2e: slurmd stopped'

BEDS=("$@")
((${#BEDS[@]})) || BEDS=(22 24 26)
for b in "${BEDS[@]}"; do
	case $b in 22 | 24 | 26) ;; *) die "usage: record-fixtures.sh [22|24|26]..." ;; esac
done

[[ $(id -u) == 0 ]] || die "run as root"

e2e_lock "$(basename "$0")"

UP=() # beds brought up, torn down on exit
cleanup() {
	local rc=$? b
	if [[ ${KEEP:-} != 1 ]]; then
		for b in "${UP[@]}"; do bash "$HERE/testbed.sh" "down$b" || true; done
	fi
	exit $rc
}
trap cleanup EXIT

# ------------------------------------------------------------------ helpers

# rec DIR CASE METHOD URL TOKEN [BODY]: one request, body saved as DIR/CASE.<code>.json
rec() {
	local dir=$1 case=$2 method=$3 url=$4 token=$5 body=${6:-} code tmp
	mkdir -p "$dir"
	rm -f "$dir/$case".*.json
	tmp=$(mktemp)
	local args=(-s -o "$tmp" -w '%{http_code} %{time_total}' --max-time 90 -X "$method") out secs
	[[ $token != none ]] && args+=(-H "X-SLURM-USER-NAME: slurm" -H "X-SLURM-USER-TOKEN: $token")
	[[ -n $body ]] && args+=(-H "Content-Type: ${CTYPE:-application/json}" --data-binary "$body")
	out=$(curl "${args[@]}" "$url") || true
	read -r code secs <<<"$out"
	[[ -n $code ]] || code=000
	mv "$tmp" "$dir/$case.$code.json"
	chmod 0644 "$dir/$case.$code.json"
	printf '  %-28s %s %s -> %s (%s bytes, %ss)\n' "$case" "$method" "${url#http://127.0.0.1:*/}" "$code" "$(stat -c %s "$dir/$case.$code.json")" "${secs:-?}" >&2
}

# sc DIR CASE CMD...: run an scontrol (or other) command, keep stdout/stderr/exit.
sc() {
	local dir=$1 case=$2 rc=0; shift 2
	mkdir -p "$dir"
	"$@" >"$dir/$case.txt" 2>"$dir/$case.stderr.txt" || rc=$?
	echo "$rc" >"$dir/$case.exit"
	printf '  %-28s exit %s: %s\n' "$case" "$rc" "${*: -3}" >&2
}

# responding_bed V NODE: no NOT_RESPONDING flag (a RESUME sets it for up to a
# second, until slurmctld's next ping reaches the node).
responding_bed() { ! s_bed "$1" scontrol show node -o "$2" | grep -q 'State=[^ ]*NOT_RESPONDING'; }
responding22() { ! scontrol show node -o "$1" | grep -q 'State=[^ ]*NOT_RESPONDING'; }

# ------------------------------------------------------------------ 22.05

record22() {
	local rel=slurm-22.05 v=v0.0.38 node=$S22_NODE
	local url=http://127.0.0.1:$S22_REST_PORT base tok
	local rd=$OUT/rest/$rel sd=$OUT/scontrol/$rel
	base=$url/slurm/$v
	tok=$(cat "$S22_TOKEN")
	rm -rf "$rd" "$sd"
	log "recording $rel"
	export SLURM_CONF=$S22_CONF

	rec "$rd" openapi GET "$url/openapi/v3" "$tok"
	rec "$rd" openapi_noauth GET "$url/openapi/v3" none
	rec "$rd" openapi_badtoken GET "$url/openapi/v3" "${tok%?????}XXXXX"
	# The version below the oldest served, as after an upgrade dropped it:
	# the answer a stale API version cache gets.
	v=${versions[0]#v0.0.}
	rec "$rd" unserved_version GET "$url/slurm/v0.0.$((v - 1))/node/$node" "$tok"
	rec "$rd/$v" ping GET "$base/ping" "$tok"
	rec "$rd/$v" node_idle GET "$base/node/$node" "$tok"
	rec "$rd/$v" nodes_idle GET "$base/nodes" "$tok"
	sc "$sd" show_node_idle scontrol show node -o "$node"
	sc "$sd" json_show_node_idle scontrol --json show node "$node"

	sc "$sd" update_drain scontrol update NodeName="$node" State=DRAIN Reason="$REASON"
	rec "$rd/$v" node_drained GET "$base/node/$node" "$tok"
	sc "$sd" show_node_drained scontrol show node -o "$node"
	sc "$sd" update_resume scontrol update NodeName="$node" State=RESUME
	rec "$rd/$v" node_resumed GET "$base/node/$node" "$tok"
	sc "$sd" show_node_resumed scontrol show node -o "$node"
	wait_for 20 "$node responding" responding22 "$node"

	scontrol update NodeName="$node" State=DRAIN Reason="$FOREIGN"
	rec "$rd/$v" node_foreign_drain GET "$base/node/$node" "$tok"
	sc "$sd" show_node_foreign scontrol show node -o "$node"
	scontrol update NodeName="$node" State=RESUME
	wait_for 20 "$node responding" responding22 "$node"

	rec "$rd/$v" node_unknown GET "$base/node/nosuchnode" "$tok"
	sc "$sd" show_node_unknown scontrol show node -o nosuchnode
	sc "$sd" update_unknown_node scontrol update NodeName=nosuchnode State=DRAIN Reason="$REASON"
	sc "$sd" update_bad_state scontrol update NodeName="$node" State=BOGUS
	rec "$rd/$v" post_drain POST "$base/node/$node" "$tok" "{\"state\":[\"DRAIN\"],\"reason\":\"$REASON\"}"
	rec "$rd/$v" post_bad_state POST "$base/node/$node" "$tok" '{"state":["BOGUS"]}'
	rec "$rd/$v" unauthorized GET "$base/node/$node" "${tok%?????}XXXXX"
	rec "$rd/$v" unauthorized_ping GET "$base/ping" "${tok%?????}XXXXX"

	# down: stop slurmd, mark DOWN
	stop slurmd22
	scontrol update NodeName="$node" State=DOWN Reason="$DOWNREASON"
	rec "$rd/$v" node_down GET "$base/node/$node" "$tok"
	sc "$sd" show_node_down scontrol show node -o "$node"

	# slurmctld stopped
	stop slurmctld22
	rec "$rd/$v" ctld_down GET "$base/node/$node" "$tok"
	rec "$rd/$v" ping_ctld_down GET "$base/ping" "$tok"
	sc "$sd" show_node_ctld_down scontrol show node -o "$node"
	sc "$sd" update_ctld_down scontrol update NodeName="$node" State=DRAIN Reason="$REASON"
	start slurmctld22 "$E2E_DIR/slurmctld22.out" /usr/sbin/slurmctld -D -f "$S22_CONF"
	wait_for 30 "slurmctld 22.05" scontrol ping || { dump_logs22; die "slurmctld 22.05 did not restart"; }
	start slurmd22 "$E2E_DIR/slurmd22.out" /usr/sbin/slurmd -D -f "$S22_CONF" -N "$S22_NODE"
	scontrol update NodeName="$node" State=RESUME || true
	wait_for 45 "node $node idle" node22_idle || { dump_logs22; die "node $node did not come back"; }
	scontrol --version >"$sd/VERSION"
	unset SLURM_CONF
}

# ------------------------------------------------------------------ 24.11, 26.05

# record_bed V REST-VERSION...: the chroot bed V (24 or 26), every case for
# each API version given; the extras (one-off POSTs, scontrol) on the last,
# newest one.
record_bed() {
	local bv=$1; shift
	local versions=("$@") last=${*: -1}
	bed "$bv"
	local rel=slurm-$B_LABEL node=gpu001 url=http://127.0.0.1:$B_REST_PORT tok v base rd sd
	rd=$OUT/rest/$rel; sd=$OUT/scontrol/$rel
	tok=$(cat "$B_TOKEN")
	rm -rf "$rd" "$sd"
	log "recording $rel (${versions[*]})"

	rec "$rd" openapi GET "$url/openapi/v3" "$tok"
	rec "$rd" openapi_noauth GET "$url/openapi/v3" none
	rec "$rd" openapi_badtoken GET "$url/openapi/v3" "${tok%?????}XXXXX"
	for v in "${versions[@]}"; do
		base=$url/slurm/$v
		rec "$rd/$v" ping GET "$base/ping" "$tok"
		rec "$rd/$v" node_idle GET "$base/node/$node" "$tok"
		rec "$rd/$v" nodes_idle GET "$base/nodes" "$tok"
	done
	sc "$sd" show_node_idle s_bed "$bv" scontrol show node -o "$node"
	sc "$sd" json_show_node_idle s_bed "$bv" scontrol --json show node "$node"

	for v in "${versions[@]}"; do
		base=$url/slurm/$v
		rec "$rd/$v" post_drain POST "$base/node/$node" "$tok" "{\"state\":[\"DRAIN\"],\"reason\":\"$REASON\"}"
		rec "$rd/$v" node_drained GET "$base/node/$node" "$tok"
		[[ $v == "$last" ]] && {
			sc "$sd" show_node_drained s_bed "$bv" scontrol show node -o "$node"
			sc "$sd" json_show_node_drained s_bed "$bv" scontrol --json show node "$node"
		}
		rec "$rd/$v" post_resume POST "$base/node/$node" "$tok" '{"state":["RESUME"]}'
		rec "$rd/$v" node_resumed GET "$base/node/$node" "$tok"
		[[ $v == "$last" ]] && {
			sc "$sd" show_node_resumed s_bed "$bv" scontrol show node -o "$node"
			sc "$sd" json_show_node_resumed s_bed "$bv" scontrol --json show node "$node"
		}
		wait_for 20 "$node responding" responding_bed "$bv" "$node"
		rec "$rd/$v" node_resumed_settled GET "$base/node/$node" "$tok"
		[[ $v == "$last" ]] && sc "$sd" show_node_resumed_settled s_bed "$bv" scontrol show node -o "$node"
		s_bed "$bv" scontrol update NodeName="$node" State=DRAIN Reason="$FOREIGN"
		rec "$rd/$v" node_foreign_drain GET "$base/node/$node" "$tok"
		[[ $v == "$last" ]] && {
			sc "$sd" show_node_foreign s_bed "$bv" scontrol show node -o "$node"
			sc "$sd" json_show_node_foreign s_bed "$bv" scontrol --json show node "$node"
		}
		s_bed "$bv" scontrol update NodeName="$node" State=RESUME
		wait_for 20 "$node responding" responding_bed "$bv" "$node"
		rec "$rd/$v" node_unknown GET "$base/node/nosuchnode" "$tok"
		rec "$rd/$v" post_bad_state POST "$base/node/$node" "$tok" '{"state":["BOGUS"]}'
		rec "$rd/$v" post_unknown_node POST "$base/node/nosuchnode" "$tok" "{\"state\":[\"DRAIN\"],\"reason\":\"$REASON\"}"
		rec "$rd/$v" unauthorized GET "$base/node/$node" "${tok%?????}XXXXX"
		rec "$rd/$v" unauthorized_ping GET "$base/ping" "${tok%?????}XXXXX"
		rec "$rd/$v" post_unauthorized POST "$base/node/$node" "${tok%?????}XXXXX" "{\"state\":[\"DRAIN\"],\"reason\":\"$REASON\"}"
	done
	# newest version only: a POST without Content-Type: application/json, a DRAIN without reason
	CTYPE=application/x-www-form-urlencoded rec "$rd/$last" post_form_content_type POST "$url/slurm/$last/node/$node" "$tok" "{\"state\":[\"DRAIN\"],\"reason\":\"$REASON\"}"
	rec "$rd/$last" post_drain_no_reason POST "$url/slurm/$last/node/$node" "$tok" '{"state":["DRAIN"]}'
	rec "$rd/$last" node_drained_no_reason GET "$url/slurm/$last/node/$node" "$tok"
	s_bed "$bv" scontrol update NodeName="$node" State=RESUME
	wait_for 20 "$node responding" responding_bed "$bv" "$node"
	sc "$sd" show_node_unknown s_bed "$bv" scontrol show node -o nosuchnode
	sc "$sd" json_show_node_unknown s_bed "$bv" scontrol --json show node nosuchnode
	sc "$sd" update_drain s_bed "$bv" scontrol update NodeName="$node" State=DRAIN Reason="$REASON"
	sc "$sd" update_resume s_bed "$bv" scontrol update NodeName="$node" State=RESUME
	wait_for 20 "$node responding" responding_bed "$bv" "$node"
	sc "$sd" update_unknown_node s_bed "$bv" scontrol update NodeName=nosuchnode State=DRAIN Reason="$REASON"
	sc "$sd" update_bad_state s_bed "$bv" scontrol update NodeName="$node" State=BOGUS

	# a mixed cluster for listing / storm-guard counting: gpu002 ours, gpu003 foreign
	s_bed "$bv" scontrol update NodeName=gpu002 State=DRAIN Reason="$REASON"
	s_bed "$bv" scontrol update NodeName=gpu003 State=DRAIN Reason="$FOREIGN"
	for v in "${versions[@]}"; do rec "$rd/$v" nodes_mixed GET "$url/slurm/$v/nodes" "$tok"; done
	sc "$sd" show_nodes_mixed s_bed "$bv" scontrol show node -o
	s_bed "$bv" scontrol update NodeName=gpu002,gpu003 State=RESUME

	# down: stop gpu004's slurmd, mark it DOWN
	stop "slurmd$bv-gpu004"
	s_bed "$bv" scontrol update NodeName=gpu004 State=DOWN Reason="$DOWNREASON"
	for v in "${versions[@]}"; do rec "$rd/$v" node_down GET "$url/slurm/$v/node/gpu004" "$tok"; done
	sc "$sd" show_node_down s_bed "$bv" scontrol show node -o gpu004
	sc "$sd" json_show_node_down s_bed "$bv" scontrol --json show node gpu004

	# slurmctld stopped
	stop "slurmctld$bv"
	for v in "${versions[@]}"; do
		rec "$rd/$v" ctld_down GET "$url/slurm/$v/node/$node" "$tok"
		rec "$rd/$v" ping_ctld_down GET "$url/slurm/$v/ping" "$tok"
	done
	rec "$rd/$last" post_drain_ctld_down POST "$url/slurm/$last/node/$node" "$tok" "{\"state\":[\"DRAIN\"],\"reason\":\"$REASON\"}"
	sc "$sd" show_node_ctld_down s_bed "$bv" scontrol show node -o "$node"
	sc "$sd" update_ctld_down s_bed "$bv" scontrol update NodeName="$node" State=DRAIN Reason="$REASON"
	start "slurmctld$bv" "$E2E_DIR/slurmctld$bv.out" chroot "$B_ROOT" /usr/sbin/slurmctld -D
	wait_for 30 "slurmctld $B_LABEL" s_bed "$bv" scontrol ping || { dump_logs_bed "$bv"; die "slurmctld $B_LABEL did not restart"; }
	start "slurmd$bv-gpu004" "$E2E_DIR/slurmd$bv-gpu004.out" chroot "$B_ROOT" /usr/sbin/slurmd -D -N gpu004
	s_bed "$bv" scontrol update NodeName=gpu004 State=RESUME || true
	wait_for 60 "$B_LABEL nodes idle" nodes_idle "$bv" || { dump_logs_bed "$bv"; die "$B_LABEL nodes did not come back"; }
	s_bed "$bv" scontrol --version >"$sd/VERSION"
}

# record_jobs BED [VERSION...]: a job's AdminComment set once the job is
# done (as gpuhc-epilog would; see docs/slurm.md), and for a job id no
# job has: scontrol on every bed, REST on each version that has a job
# POST with admin_comment (v0.0.40+; 22.05's v0.0.38 has none). Job 1
# is an srun /bin/true, COMPLETED by the time it is updated.
record_jobs() {
	local bv=$1 rel url tok rd sd v run; shift
	if [[ $bv == 22 ]]; then
		rel=slurm-22.05 run=(env SLURM_CONF="$S22_CONF")
	else
		bed "$bv"; rel=slurm-$B_LABEL run=(s_bed "$bv") url=http://127.0.0.1:$B_REST_PORT tok=$(cat "$B_TOKEN")
	fi
	rd=$OUT/rest/$rel sd=$OUT/scontrol/$rel
	log "recording $rel job updates"
	"${run[@]}" srun -N1 /bin/true
	wait_for 30 "job 1 completed" eval '"${run[@]}" scontrol show job -o 1 | grep -q "JobState=COMPLETED "'
	sc "$sd" update_job_finished "${run[@]}" scontrol update JobId=1 AdminComment="gpuhc: no hardware fault seen"
	sc "$sd" update_job_unknown "${run[@]}" scontrol update JobId=999999 AdminComment="gpuhc: no hardware fault seen"
	for v in "$@"; do
		rec "$rd/$v" post_job_finished POST "$url/slurm/$v/job/1" "$tok" '{"admin_comment":"gpuhc: no hardware fault seen"}'
		rec "$rd/$v" post_job_unknown POST "$url/slurm/$v/job/999999" "$tok" '{"admin_comment":"gpuhc: no hardware fault seen"}'
	done
}

# 24.11 serves v0.0.40-42; 26.05 serves v0.0.42-45 (its /openapi/v3).
record24() { record_bed 24 v0.0.40 v0.0.41 v0.0.42; }
record26() { record_bed 26 v0.0.42 v0.0.43 v0.0.44 v0.0.45; }

# ------------------------------------------------------------------ main

t0=$SECONDS
for b in "${BEDS[@]}"; do
	UP+=("$b")
	bash "$HERE/testbed.sh" "up$b"
	case ${GPUHC_FIXTURES_ONLY:-} in
	jobs) case $b in 22) record_jobs 22 ;; 24) record_jobs 24 v0.0.40 v0.0.41 v0.0.42 ;; 26) record_jobs 26 v0.0.42 v0.0.43 v0.0.44 v0.0.45 ;; esac ;;
	*) "record$b"; case $b in 22) record_jobs 22 ;; 24) record_jobs 24 v0.0.40 v0.0.41 v0.0.42 ;; 26) record_jobs 26 v0.0.42 v0.0.43 v0.0.44 v0.0.45 ;; esac ;;
	esac
	if [[ ${KEEP:-} != 1 ]]; then
		bash "$HERE/testbed.sh" "down$b"
		UP=() # only one bed is up at a time without KEEP
	fi
done
find "$OUT/rest" "$OUT/scontrol" -type f -exec chmod 0644 {} +
log "fixtures recorded under $OUT in $((SECONDS - t0))s (${BEDS[*]})"

#!/usr/bin/env bash
# gpuhc e2e: the SPANK plugin (spank/gpuhc_spank.c) against real Slurm, on
# all three test beds: 22.05 on the host, 24.11 in the trixie chroot and
# 26.05 in the forky chroot.
#
# Sourced by run.sh after testbed.sh (it uses run.sh's say/pass/fail/expect
# and WHY), then:
#   spank_scenarios          # all three test beds; or one of:
#   spank_scenario22         # Slurm 22.05 (host)
#   spank_scenario24         # Slurm 24.11 (chroot)
#   spank_scenario26         # Slurm 26.05 (chroot)
#   spank_dump               # on failure: daemon logs, prolog env files, stderr
# Each scenario builds the plugin against that Slurm's own headers (make
# spank; 24.11's and 26.05's come from the chroot's libslurm-dev .deb,
# unpacked once and cached in $CACHE), brings its test bed up with
# PlugStackConfig= and a Prolog that saves its environment, runs
# srun/sbatch/salloc, and takes the test bed down again.
#
# Run directly (root), it is its own driver: test/e2e/spank.sh [22|24|26].
#
# Facts it relies on (verified on 22.05.8, 24.11.5 and 26.05.5):
# - clients (srun/sbatch/salloc) and slurmstepd read plugstack.conf on every
#   run, so the file named by PlugStackConfig= can change under running
#   daemons; only the PlugStackConfig=/Prolog= lines need slurmd to (re)start.
# - a plugin built against another Slurm major.minor is refused ("Incompatible
#   plugin version"): optional => the option is unknown, required => every
#   command fails. Hence one build per test bed.
# - without PrologFlags=Alloc the Prolog runs at the node's first step and
#   sees that step's SPANK_ variables (srun inside salloc overrides salloc's).

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
	# Run directly: the test bed's variables and helpers first (testbed.sh
	# does not run its main when sourced).
	set -euo pipefail
	# shellcheck source=testbed.sh
	source "$(dirname "$0")/testbed.sh"
fi

SPANK_REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
SPANK22=$E2E_DIR/spank22                 # scenario files, host (22.05)
SPANK_IN=/srv/gpuhc-spank                # scenario files, inside a chroot
SPANK_WAIT=${GPUHC_SPANK_WAIT:-30}       # seconds for a job's Prolog to run
SPANK_MSG='--gpu-health: "bogus" is not quick or full'
# gpuhc-prolog, run by the test Prolog after it saved the environment.
SPANK_PROLOG_BIN=${GPUHC_PROLOG_BIN:-$SPANK_REPO/bin/gpuhc-prolog}

# spank_cc: the plugin is C; a bare CI host may lack a compiler.
spank_cc() {
	command -v cc >/dev/null && command -v make >/dev/null && return 0
	say "spank: installing gcc, libc6-dev, make to build the plugin"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
		gcc libc6-dev make >/dev/null
}

# spank_build INCLUDE_DIR OUT_SO: make spank against INCLUDE_DIR/slurm/spank.h.
spank_build() {
	make -s -C "$SPANK_REPO" spank SLURM_INCLUDE="$1" SPANK_SO="$2"
}

# spank_hdr_series INCLUDE_DIR: "major.minor" of those headers.
spank_hdr_series() {
	local n
	n=$(sed -n 's/^#define SLURM_VERSION_NUMBER 0x\([0-9a-fA-F]*\).*/\1/p' "$1/slurm/slurm_version.h")
	[[ -n $n ]] || return 1
	printf '%d.%02d\n' $((16#$n >> 16)) $(((16#$n >> 8) & 255))
}

# spank_headers ROOT: print the include dir of that chroot's Slurm headers.
# The chroot runs Slurm but has no libslurm-dev; downloading the one .deb
# that matches its slurm-client and unpacking it (cached, by version) is
# cheaper than installing it, and leaves the cached chroot as it is.
spank_headers() {
	local root=$1 ver dir deb tmp=/tmp/gpuhc-spank-dl
	ver=$(chroot "$root" dpkg-query -W -f='${Version}' slurm-client) || return 1
	dir=$CACHE/libslurm-dev_$ver
	if [[ ! -f $dir/usr/include/slurm/spank.h ]]; then
		rm -rf "${root:?}$tmp" "$dir.tmp"
		mkdir -p "$root$tmp"
		if ! chroot "$root" sh -c "cd $tmp && apt-get download -q libslurm-dev=$ver" >&2; then
			chroot "$root" apt-get update -qq >&2 &&
				chroot "$root" sh -c "cd $tmp && apt-get download -q libslurm-dev=$ver" >&2 || {
				rm -rf "${root:?}$tmp"; return 1; }
		fi
		deb=$(ls "$root$tmp"/libslurm-dev_*.deb) || return 1
		dpkg-deb -x "$deb" "$dir.tmp" && mv "$dir.tmp" "$dir"
		rm -rf "${root:?}$tmp"
	fi
	echo "$dir/usr/include"
}

# spank_files DIR DIR_AS_SLURMD_SEES_IT SO: the plugin; a plugstack.conf
# that includes plugstack.conf.d/*.conf, as the shipped example says, with
# the shipped etc/plugstack.conf.d/gpuhc.conf there (only the .so path
# changed); and a Prolog that saves its environment as prolog.<jobid>.env
# (written whole, then renamed, so a reader never sees half a file), then
# runs gpuhc-prolog, whose event log (events.<node>.jsonl) must show the
# job's mode. On these GPU-less test beds its checks SKIP, so it never
# drains; bandwidth is off (no libcuda).
spank_files() {
	local d=$1 di=$2 so=$3 n
	rm -rf --one-file-system "$d"
	mkdir -p "$d/plugstack.conf.d"
	chmod 0755 "$d" "$d/plugstack.conf.d"
	install -m 0755 "$so" "$d/gpuhc_spank.so"
	printf '# gpuhc e2e (test/e2e/spank.sh)\ninclude %s/plugstack.conf.d/*.conf\n' "$di" >"$d/plugstack.conf"
	sed "s|^optional /.*/gpuhc_spank.so\$|optional $di/gpuhc_spank.so|" \
		"$SPANK_REPO/etc/plugstack.conf.d/gpuhc.conf" >"$d/plugstack.conf.d/gpuhc.conf"
	n=$(grep -c "^optional $di/gpuhc_spank.so\$" "$d/plugstack.conf.d/gpuhc.conf") || true
	[[ $n == 1 ]] || { echo "spank: etc/plugstack.conf.d/gpuhc.conf has no single 'optional /…/gpuhc_spank.so' line" >&2; return 1; }
	chmod 0644 "$d/plugstack.conf.d/gpuhc.conf"
	cat >"$d/prolog.sh" <<EOF
#!/bin/sh
# gpuhc e2e Prolog: keep the environment slurmd gives it.
/usr/bin/env >$di/prolog.\$SLURM_JOB_ID.tmp
/bin/mv $di/prolog.\$SLURM_JOB_ID.tmp $di/prolog.\$SLURM_JOB_ID.env
exec $di/gpuhc-prolog --config $di/gpuhc.toml >>$di/prolog.log 2>&1
EOF
	install -m 0755 "$SPANK_PROLOG_BIN" "$d/gpuhc-prolog"
	cat >"$d/gpuhc.toml" <<EOF
# gpuhc e2e (test/e2e/spank.sh): gpuhc-prolog behind the SPANK option
state_dir = "$di/state/%n"
lock_file = "$di/state/%n.lock"
[log]
file = ""
[events]
file = "$di/events.%n.jsonl"
[slurm]
scontrol = "/nonexistent/scontrol"
[checks.bandwidth]
libcuda = ""
EOF
	chmod 0644 "$d/plugstack.conf"
	chmod 0755 "$d/prolog.sh"
}

# spank_conf DIR_AS_SLURMD_SEES_IT: the slurm.conf lines (GPUHC_S2x_EXTRA).
spank_conf() {
	printf 'PlugStackConfig=%s/plugstack.conf\nProlog=%s/prolog.sh\n' "$1" "$1"
}

# Client commands, run where each test bed's clients live. They never fail
# (the caller looks at SPANK_RC), keep stdout in SPANK_OUT and stderr in
# SPANK_ERR (one line), and log both to DIR/commands.log.
spank_run() {
	local bed=$1 d; shift
	local out err rc=0 t0=$SECONDS
	if [[ $bed == 22 ]]; then
		d=$SPANK22
		out=$(cd "$d" && SLURM_CONF=$S22_CONF timeout 60 "$@" 2>"$d/stderr") || rc=$?
	else
		bed "$bed"
		d=$B_ROOT$SPANK_IN
		out=$(timeout 60 chroot "$B_ROOT" "$@" 2>"$d/stderr") || rc=$?
	fi
	err=$(cat "$d/stderr")
	{ echo "\$ $* (exit $rc, $((SECONDS - t0))s)"; echo "$out"; echo "$err"; } >>"$d/commands.log"
	SPANK_RC=$rc SPANK_OUT=$out SPANK_ERR=${err//$'\n'/ | }
}

# spank_dir BED: the scenario directory, host view.
spank_dir() {
	if [[ $1 == 22 ]]; then echo "$SPANK22"; else bed "$1"; echo "$B_ROOT$SPANK_IN"; fi
}

# spank_env_of BED JOBID: path (host view) of the Prolog's saved environment.
spank_env_of() { echo "$(spank_dir "$1")/prolog.$2.env"; }

# spank_wait_env BED JOBID: wait until that job's Prolog has run.
spank_wait_env() {
	local f end=$((SECONDS + SPANK_WAIT))
	f=$(spank_env_of "$1" "$2")
	until [[ -f $f ]]; do
		((SECONDS < end)) || { WHY="no Prolog environment for job $2 after ${SPANK_WAIT}s"; return 1; }
		sleep 0.25
	done
}

# spank_mode_is BED JOBID WANT: the job's Prolog saw SPANK_GPUHC_MODE=WANT,
# or (WANT empty) no SPANK_GPUHC_MODE at all.
spank_mode_is() {
	local f got
	spank_wait_env "$1" "$2" || return 1
	f=$(spank_env_of "$1" "$2")
	got=$(grep '^SPANK_GPUHC_MODE=' "$f" || true)
	WHY="Prolog of job $2 saw '${got:-no SPANK_GPUHC_MODE}'"
	if [[ -z $3 ]]; then [[ -z $got ]]; else [[ $got == "SPANK_GPUHC_MODE=$3" ]]; fi
}

# spank_event_mode BED JOBID WANT: gpuhc-prolog's event log has the job's
# prolog event with mode WANT.
spank_event_mode() {
	local d end=$((SECONDS + SPANK_WAIT))
	d=$(spank_dir "$1")
	until cat "$d"/events.*.jsonl 2>/dev/null | jq -e -s --arg j "$2" --arg m "$3" \
		'[.[] | select(.kind == "prolog" and .job_id == $j and .mode == $m)] | length == 1' >/dev/null; do
		((SECONDS < end)) || {
			WHY="no prolog event with job_id $2 and mode $3: $(grep -h "\"job_id\":\"$2\"" "$d"/events.*.jsonl 2>/dev/null | head -c 400)"
			return 1
		}
		sleep 0.25
	done
}

# spank_refused: the last command failed, said why, and submitted nothing.
spank_refused() {
	WHY="exit $SPANK_RC, stderr: $SPANK_ERR"
	((SPANK_RC != 0)) && [[ $SPANK_ERR == *"$SPANK_MSG"* && $SPANK_OUT != *Submitted* ]]
}

# spank_jobid_sbatch: the job id from the last sbatch, or empty.
spank_jobid_sbatch() { sed -n 's/^Submitted batch job \([0-9][0-9]*\)$/\1/p' <<<"$SPANK_OUT"; }
# spank_jobid_srun: the job id printed by "printenv SLURM_JOB_ID", or empty.
spank_jobid_srun() { { grep -x '[0-9][0-9]*' <<<"$SPANK_OUT" || true; } | tail -1; }

# spank_checks BED LABEL WORKDIR: the assertions, against a test bed that is
# up with spank_conf's lines. WORKDIR is the job's working directory as the
# clients see it.
spank_checks() {
	local bed=$1 l=$2 wd=$3 j1 j2 j3 j4
	local sb=(sbatch --chdir="$wd" --output="$wd/job.%j.out")

	spank_run "$bed" sbatch --help
	WHY="sbatch --help: exit $SPANK_RC"
	expect "$l: sbatch --help lists --gpu-health=quick|full" \
		grep -q -- '--gpu-health=quick|full' <<<"$SPANK_OUT"

	spank_run "$bed" "${sb[@]}" --gpu-health=full --wrap=true
	j1=$(spank_jobid_sbatch)
	WHY="exit $SPANK_RC, stdout '$SPANK_OUT', stderr: $SPANK_ERR"
	expect "$l: sbatch --gpu-health=full --wrap=true is accepted" [ "$SPANK_RC" = 0 -a -n "$j1" ]
	expect "$l: its Prolog sees SPANK_GPUHC_MODE=full" spank_mode_is "$bed" "${j1:-none}" full
	expect "$l: gpuhc-prolog's event log has job ${j1:-?} with mode=full" spank_event_mode "$bed" "${j1:-none}" full

	spank_run "$bed" srun --chdir="$wd" --gpu-health=quick /usr/bin/printenv SLURM_JOB_ID
	j2=$(spank_jobid_srun)
	WHY="exit $SPANK_RC, stdout '$SPANK_OUT', stderr: $SPANK_ERR"
	expect "$l: srun --gpu-health=quick runs the job" [ "$SPANK_RC" = 0 -a -n "$j2" ]
	expect "$l: its Prolog sees SPANK_GPUHC_MODE=quick" spank_mode_is "$bed" "${j2:-none}" quick
	expect "$l: gpuhc-prolog's event log has job ${j2:-?} with mode=quick" spank_event_mode "$bed" "${j2:-none}" quick

	spank_run "$bed" "${sb[@]}" --gpu-health=bogus --wrap=true
	expect "$l: sbatch --gpu-health=bogus is refused at submit time: non-zero exit, '$SPANK_MSG'" spank_refused
	spank_run "$bed" srun --chdir="$wd" --gpu-health=bogus /bin/true
	expect "$l: srun --gpu-health=bogus is refused the same way" spank_refused
	spank_run "$bed" salloc --chdir="$wd" --gpu-health=bogus /bin/true
	expect "$l: salloc --gpu-health=bogus is refused the same way" spank_refused

	spank_run "$bed" "${sb[@]}" --wrap=true
	j3=$(spank_jobid_sbatch)
	WHY="exit $SPANK_RC, stdout '$SPANK_OUT', stderr: $SPANK_ERR"
	expect "$l: sbatch without --gpu-health is accepted" [ "$SPANK_RC" = 0 -a -n "$j3" ]
	# Job ids are consecutive: none was used by the three refused commands.
	WHY="job ids: srun $j2, then $j3"
	expect "$l: the refused commands submitted nothing (next job id is $((${j2:-0} + 1)))" \
		[ -n "$j2" -a "${j3:-x}" = "$((${j2:-0} + 1))" ]
	expect "$l: a job without --gpu-health has no SPANK_GPUHC_MODE in its Prolog" \
		spank_mode_is "$bed" "${j3:-none}" ""

	spank_run "$bed" salloc --chdir="$wd" --gpu-health=full /usr/bin/srun /usr/bin/printenv SLURM_JOB_ID
	j4=$(spank_jobid_srun)
	WHY="exit $SPANK_RC, stdout '$SPANK_OUT', stderr: $SPANK_ERR"
	expect "$l: salloc --gpu-health=full srun … runs" [ "$SPANK_RC" = 0 -a -n "$j4" ]
	expect "$l: its Prolog sees SPANK_GPUHC_MODE=full" spank_mode_is "$bed" "${j4:-none}" full
}

# spank_series_ok LABEL INCLUDE_DIR SERIES: the headers are that Slurm's.
spank_series_ok() {
	local got
	got=$(spank_hdr_series "$2") || got=unknown
	WHY="headers in $2 are Slurm $got"
	expect "$1: plugin headers match the test bed's Slurm $3" [ "$got" = "$3" ]
}

spank_scenario22() {
	say "spank: Slurm 22.05 (host): --gpu-health through srun, sbatch, salloc to the Prolog"
	RAN_SPANK22=1
	local t0=$SECONDS series
	spank_cc
	down22 quiet
	series=$(/usr/sbin/slurmd -V | awk '{split($2, v, "."); print v[1] "." v[2]}')
	spank_series_ok "22.05" /usr/include "$series"
	if ! spank_build /usr/include "$E2E_DIR/gpuhc_spank22.so"; then
		fail "22.05: make spank (host headers) failed"
		return 0
	fi
	if ! spank_files "$SPANK22" "$SPANK22" "$E2E_DIR/gpuhc_spank22.so"; then
		fail "22.05: could not lay out the plugin, plugstack.conf and Prolog"
		return 0
	fi
	GPUHC_S22_EXTRA=$(spank_conf "$SPANK22") up22
	spank_checks 22 "22.05" "$SPANK22"
	down22 quiet
	say "spank: 22.05 done in $((SECONDS - t0))s"
}

# spank_scenario_bed 24|26: the plugin built against that chroot's headers,
# on that chroot bed.
spank_scenario_bed() {
	local v=$1 t0=$SECONDS inc series l
	bed "$v"
	l=$B_LABEL
	say "spank: Slurm $l (chroot): --gpu-health through srun, sbatch, salloc to the Prolog"
	declare -g "RAN_SPANK$v=1"
	spank_cc
	need_chroot "$v"
	down_bed "$v" quiet
	bed "$v"
	if ! inc=$(spank_headers "$B_ROOT"); then
		fail "$l: could not get the chroot's libslurm-dev headers"
		return 0
	fi
	series=$(chroot "$B_ROOT" /usr/sbin/slurmd -V | awk '{split($2, v, "."); print v[1] "." v[2]}')
	spank_series_ok "$l" "$inc" "$series"
	if ! spank_build "$inc" "$E2E_DIR/gpuhc_spank$v.so"; then
		fail "$l: make spank SLURM_INCLUDE=$inc failed"
		return 0
	fi
	if ! spank_files "$B_ROOT$SPANK_IN" "$SPANK_IN" "$E2E_DIR/gpuhc_spank$v.so"; then
		fail "$l: could not lay out the plugin, plugstack.conf and Prolog"
		return 0
	fi
	local -x "GPUHC_S${v}_EXTRA=$(spank_conf "$SPANK_IN")"
	up_bed "$v"
	spank_checks "$v" "$l" "$SPANK_IN"
	down_bed "$v" quiet
	say "spank: $l done in $((SECONDS - t0))s"
}
spank_scenario24() { spank_scenario_bed 24; }
spank_scenario26() { spank_scenario_bed 26; }

spank_scenarios() {
	spank_scenario22
	spank_scenario24
	spank_scenario26
}

# spank_dump: what a failure needs (call from run.sh's dump_all).
spank_dump() {
	local d f
	[[ -n ${RAN_SPANK22:-} ]] && dump_logs22 2>&1
	[[ -n ${RAN_SPANK24:-} ]] && dump_logs24 2>&1
	[[ -n ${RAN_SPANK26:-} ]] && dump_logs26 2>&1
	for d in ${RAN_SPANK22:+"$SPANK22"} ${RAN_SPANK24:+"$ROOT24$SPANK_IN"} ${RAN_SPANK26:+"$ROOT26$SPANK_IN"}; do
		for f in "$d"/commands.log "$d"/prolog.*.env "$d"/prolog.log "$d"/events.*.jsonl; do
			[[ -f $f ]] || continue
			echo "===== $f (last 60 lines)"; tail -60 "$f"
		done
	done
	return 0
}

# ------------------------------------------------------------------ driver
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
	e2e_standalone spank "$@"
fi

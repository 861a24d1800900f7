#!/usr/bin/env bash
# gpu-smoke.sh - check gpuhc's GPU side against real NVML on a GPU machine.
#
# Reads the GPUs; changes nothing on them (no reset, no clocks, no power
# limit, no persistence or MIG mode), and nothing in Slurm (scontrol is
# /bin/false here). Everything gpuhc writes goes to a temporary directory.
#
#   1. the gpu package's real-NVML test (TestRealNVMLOnGPUs, with
#      GPUHC_REAL_NVML=1): count, driver and lost all OK;
#   2. gpuhc-healthcheck --dry-run with state, lock, events and metrics in
#      the temporary directory: every gpu.* check must be OK, WARN or SKIP
#      (no FAIL, no ERROR; on a one-GPU box gpu.nvlink and gpu.fabric are
#      expected to SKIP, and anything else there is reported);
#   3. timing: RUNS (20) runs of the binary, median and max wall time, and
#      each check's own duration from the metrics file;
#   4. bandwidth through the CUDA driver API (TestRealCUDA in
#      internal/bandwidth, GPUHC_REAL_CUDA=1): H2D, D2H and D2D per GPU and
#      P2P between GPUs, against the per-model floors, every figure kept in
#      bandwidth.txt for calibrating them (copies of a few hundred MiB per
#      GPU: seconds of load, nothing changed on the GPUs).
#
# Needs bash, coreutils, awk, the NVIDIA driver, and Go to build the two
# binaries from this tree. Where Go cannot fetch the modules, build them
# elsewhere first and bring bin/ along; they are used when building here
# fails:
#
#   make build && go test -c -o bin/gpuhc-gpu.test ./internal/gpu
#
# Results go to $OUT if set (else a new temporary directory, printed at
# the end): summary.txt, and one file per step. Exit 0 when every step
# passed, 1 otherwise.
#
# GPUHC_SMOKE_SIMULATE=dgxh200 runs steps 2 and 3 against a simulated
# server instead (and skips step 1): a check of this script's plumbing on
# a machine without GPUs, not a hardware validation.
set -u -o pipefail

cd "$(dirname "$0")/.."
GO=${GO:-go}
RUNS=${RUNS:-20}
SIMULATE=${GPUHC_SMOKE_SIMULATE:-}
export CGO_CFLAGS=${CGO_CFLAGS:-"-O2 -g -Wno-deprecated-declarations"}

OUT=${OUT:-}
if [ -z "$OUT" ]; then
	OUT=$(mktemp -d /tmp/gpuhc-smoke.XXXXXX)
fi
mkdir -p "$OUT"
WORK=$(mktemp -d /tmp/gpuhc-smoke-work.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

HC=bin/gpuhc-healthcheck
GT=bin/gpuhc-gpu.test
BT=bin/gpuhc-bandwidth.test
failed=0
summary() { echo "$*" | tee -a "$OUT/summary.txt"; }
bad() { summary "FAIL: $*"; failed=1; }
: >"$OUT/summary.txt"

# ---- 0. the machine -------------------------------------------------------
{
	echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "host: $(uname -n) $(uname -r) $(uname -m)"
	echo "user: $(id)"
	echo "go: $($GO version 2>/dev/null || echo none)"
	echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (dirty)')"
	echo "driver: $(cat /proc/driver/nvidia/version 2>/dev/null | head -1 || echo 'no /proc/driver/nvidia/version')"
	echo "libnvidia-ml: $(ldconfig -p 2>/dev/null | grep -m1 'libnvidia-ml.so.1' || echo 'not in ldconfig cache')"
	echo "boot_id: $(cat /proc/sys/kernel/random/boot_id 2>/dev/null)"
	echo "dmesg_restrict: $(cat /proc/sys/kernel/dmesg_restrict 2>/dev/null)"
} >"$OUT/env.txt"
cat "$OUT/env.txt"
# Read-only queries, for comparing with what gpuhc reads.
if command -v nvidia-smi >/dev/null; then
	nvidia-smi -L >"$OUT/nvidia-smi-L.txt" 2>&1
	nvidia-smi -q >"$OUT/nvidia-smi-q.txt" 2>&1
	nvidia-smi nvlink -s >"$OUT/nvidia-smi-nvlink.txt" 2>&1
	nvidia-smi topo -m >"$OUT/nvidia-smi-topo.txt" 2>&1
fi

# ---- build ----------------------------------------------------------------
# From this tree when Go can (modules in the cache or reachable), else the
# prebuilt binaries in bin/.
if timeout 600 env CGO_ENABLED=1 $GO build -trimpath -o "$WORK/gpuhc-healthcheck" ./healthcheck >"$OUT/build.txt" 2>&1 &&
	timeout 600 env CGO_ENABLED=1 $GO test -c -o "$WORK/gpuhc-gpu.test" ./internal/gpu >>"$OUT/build.txt" 2>&1 &&
	timeout 600 env CGO_ENABLED=1 $GO test -c -o "$WORK/gpuhc-bandwidth.test" ./internal/bandwidth >>"$OUT/build.txt" 2>&1; then
	HC=$WORK/gpuhc-healthcheck GT=$WORK/gpuhc-gpu.test BT=$WORK/gpuhc-bandwidth.test
	summary "ok: built from this tree"
elif [ -x "$HC" ] && [ -x "$GT" ]; then
	HC=$PWD/$HC GT=$PWD/$GT
	summary "note: cannot build here (see build.txt); using the prebuilt $HC and $GT"
else
	bad "cannot build (see build.txt), and no prebuilt $HC and $GT"
fi
[ -x "$HC" ] && echo "binary: $("$HC" --version 2>&1)" | tee -a "$OUT/env.txt"

# ---- 1. go test against real NVML ----------------------------------------
if [ -n "$SIMULATE" ]; then
	summary "note: simulating $SIMULATE: real-NVML test skipped, nothing here validates hardware"
elif [ -x "$GT" ]; then
	(cd internal/gpu && GPUHC_REAL_NVML=1 timeout 120 "$GT" -test.run '^TestRealNVML' -test.v -test.count=1 -test.timeout 100s) \
		>"$OUT/go-test.txt" 2>&1
	rc=$?
	if [ $rc -ne 0 ]; then
		bad "go test TestRealNVMLOnGPUs exited $rc (see go-test.txt)"
	elif ! grep -q -- '--- PASS: TestRealNVMLOnGPUs' "$OUT/go-test.txt"; then
		bad "TestRealNVMLOnGPUs did not pass (skipped? see go-test.txt)"
	else
		summary "ok: TestRealNVMLOnGPUs"
	fi
fi

# ---- the configuration: everything gpuhc writes stays in $WORK ------------
cat >"$WORK/gpuhc.toml" <<EOF
root = "/"
state_dir = "$WORK/state"
lock_file = "$WORK/healthcheck.lock"
[log]
file = "$WORK/gpuhc.log"
[events]
file = "$WORK/events.jsonl"
[metrics]
textfile_dir = "$WORK/metrics"
[slurm]
# Never reach a real Slurm: a drain attempt fails harmlessly.
backend = "scontrol"
scontrol = "/bin/false"
EOF
# gpu.xid reads /dev/kmsg, which only root may open when
# kernel.dmesg_restrict is 1.
if ! (: </dev/kmsg) 2>/dev/null; then
	printf '[checks.gpu.xid]\nenabled = false\n' >>"$WORK/gpuhc.toml"
	summary "note: /dev/kmsg not readable as $(id -un): gpu.xid not run (run as root to include it)"
fi
cp "$WORK/gpuhc.toml" "$OUT/gpuhc.toml"
HCRUN=("$HC" --config "$WORK/gpuhc.toml" --node gpu-smoke)
if [ -n "$SIMULATE" ]; then
	HCRUN+=(--simulate "$SIMULATE")
fi

# ---- 2. one dry run -------------------------------------------------------
if [ -x "$HC" ]; then
	"${HCRUN[@]}" --check-config "$WORK/gpuhc.toml" >"$OUT/check-config.txt" 2>&1 || bad "configuration refused (see check-config.txt)"
	timeout 70 "${HCRUN[@]}" --dry-run >"$OUT/dryrun.txt" 2>&1
	rc=$?
	cat "$OUT/dryrun.txt"
	# The table: CHECK COMPONENT STATUS MESSAGE, columns 2+ spaces apart.
	awk '$1 ~ /^gpu\./ && NF >= 3 {print $1, $2, $3}' "$OUT/dryrun.txt" >"$WORK/gpu-results"
	if [ ! -s "$WORK/gpu-results" ]; then
		bad "dry run printed no gpu.* result (exit $rc)"
	fi
	while read -r chk comp st; do
		msg=$(awk -v c="$chk" -v p="$comp" '$1 == c && $2 == p {sub(/^[^ ]+ +[^ ]+ +[^ ]+ +/, ""); print; exit}' "$OUT/dryrun.txt")
		case "$st" in
		OK) ;;
		SKIP)
			case "$chk:$msg" in
			*"no NVIDIA GPU on this node"*) bad "$chk $comp SKIP: $msg (this script is for a GPU machine)" ;;
			gpu.nvlink:* | gpu.fabric:*) summary "note: $chk $comp SKIP: $msg" ;;
			*) summary "review: $chk $comp SKIP: $msg" ;;
			esac
			;;
		WARN) summary "review: $chk $comp WARN: $msg" ;;
		*) bad "$chk $comp $st: $msg" ;;
		esac
	done <"$WORK/gpu-results"
	for chk in gpu.nvlink gpu.fabric; do
		if awk -v c="$chk" '$1 == c && $3 != "SKIP"' "$WORK/gpu-results" | grep -q .; then
			summary "note: $chk did not SKIP on every GPU (expected on a one-GPU box; see dryrun.txt)"
		fi
	done
	case $rc in
	0) summary "ok: dry run exit 0" ;;
	*) bad "dry run exit $rc (1: a FAIL, 3: an ERROR or internal error)" ;;
	esac
	if grep -q '^policy (dry run): none \[' "$OUT/dryrun.txt"; then
		summary "ok: policy would do nothing"
	else
		bad "policy: $(grep '^policy' "$OUT/dryrun.txt")"
	fi
fi

# ---- 3. timing ------------------------------------------------------------
# Real runs (not dry runs) so that gpuhc writes its metrics, with each
# check's duration; all of it under $WORK, and Slurm is /bin/false. The
# second and later runs also judge the counters' deltas.
if [ -x "$HC" ]; then
	printf 'run\texit\twall_ms\treported\n' >"$OUT/timing-runs.tsv"
	: >"$WORK/durations"
	for i in $(seq 1 "$RUNS"); do
		t0=$(date +%s%N)
		timeout 70 "${HCRUN[@]}" >"$WORK/run.txt" 2>&1
		rc=$?
		t1=$(date +%s%N)
		rep=$(grep -o ' in [0-9.]*[mµn]*s$' "$WORK/run.txt" | tail -1 | sed 's/^ in //')
		printf '%d\t%d\t%d\t%s\n' "$i" "$rc" $(((t1 - t0) / 1000000)) "$rep" >>"$OUT/timing-runs.tsv"
		if [ $rc -ne 0 ]; then
			cp "$WORK/run.txt" "$OUT/run-$i.txt"
			bad "timing run $i exit $rc (see run-$i.txt)"
		fi
		awk '/^gpuhc_check_duration_seconds\{/ {
			match($0, /check="[^"]*"/); c = substr($0, RSTART + 7, RLENGTH - 8); print c, $NF }' \
			"$WORK/metrics/gpuhc.prom" >>"$WORK/durations" 2>/dev/null
	done
	cp "$WORK/metrics/gpuhc.prom" "$OUT/gpuhc.prom" 2>/dev/null
	cp "$WORK/events.jsonl" "$OUT/events.jsonl" 2>/dev/null
	cp -r "$WORK/state" "$OUT/state" 2>/dev/null
	# median (lower middle) and max of a column of numbers on stdin
	medmax() { sort -n | awk '{v[NR] = $1} END {if (NR) printf "%s\t%s\t%d", v[int((NR + 1) / 2)], v[NR], NR}'; }
	{
		printf 'what\tmedian\tmax\truns\n'
		printf 'wall_ms\t%s\n' "$(awk -F'\t' 'NR > 1 {print $3}' "$OUT/timing-runs.tsv" | medmax)"
		for chk in $(awk '{print $1}' "$WORK/durations" | sort -u); do
			printf '%s_ms\t%s\n' "$chk" "$(awk -v c="$chk" '$1 == c {printf "%.1f\n", $2 * 1000}' "$WORK/durations" | medmax)"
		done
	} >"$OUT/timing-summary.tsv"
	cat "$OUT/timing-summary.tsv"
	summary "timing: wall median/max ms: $(awk -F'\t' '$1 == "wall_ms" {print $2 "/" $3}' "$OUT/timing-summary.tsv") over $RUNS runs (first run included: NVML init, state baselines)"
fi

# ---- 4. bandwidth ---------------------------------------------------------
if [ -n "$SIMULATE" ]; then
	summary "note: simulating $SIMULATE: bandwidth (real CUDA) skipped"
elif [ -x "$BT" ]; then
	(cd internal/bandwidth && GPUHC_REAL_CUDA=1 timeout 300 "$BT" -test.run '^TestRealCUDA$' -test.v -test.count=1 -test.timeout 280s) \
		>"$OUT/bandwidth.txt" 2>&1
	rc=$?
	grep -E 'figure |took ' "$OUT/bandwidth.txt" | sed 's/^ *[a-z_]*\.go:[0-9]*: //'
	for kind in h2d d2h d2d p2p; do
		v=$(awk -v k="$kind" '$2 == "figure" && $4 == k {print $5}' "$OUT/bandwidth.txt" | sort -n | awk '{v[NR] = $1} END {if (NR) printf "min %s max %s GB/s over %d", v[1], v[NR], NR}')
		[ -n "$v" ] && summary "bandwidth: $kind $v"
	done
	if [ $rc -ne 0 ]; then
		bad "TestRealCUDA exited $rc: a figure below its floor, or CUDA not usable (see bandwidth.txt)"
	elif ! grep -q -- '--- PASS: TestRealCUDA' "$OUT/bandwidth.txt"; then
		bad "TestRealCUDA did not pass (skipped? see bandwidth.txt)"
	else
		summary "ok: TestRealCUDA: every figure at or above its floor"
	fi
else
	summary "note: no bandwidth test binary ($BT): bandwidth not measured"
fi

echo
echo "results in $OUT"
if [ $failed -ne 0 ]; then
	summary "gpu-smoke: FAILED"
	exit 1
fi
summary "gpu-smoke: passed"

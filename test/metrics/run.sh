#!/bin/bash
# gpuhc's metrics on the real stack (make metrics-test): real
# gpuhc-healthcheck runs write gpuhc.prom, Debian's node_exporter exposes
# it, Debian's Prometheus scrapes it every second and evaluates
# etc/prometheus/gpuhc.rules.yml, and every panel expression of
# etc/grafana/gpuhc.json is queried through Prometheus's HTTP API.
#
# The node is a DGX H100 simulated by --simulate dgxh100 (no GPU needed);
# --deep measures bandwidth through internal/bandwidth's fake libcuda
# (built here with gcc). Slurm is test/metrics/scontrol-shim.sh, a
# scontrol with memory: drains land, so gpuhc_drained is the real one.
#
# Phases: healthy (a plain run, then a --deep run); an injected XID 79 on
# gpu3 (drained); the storm guard (the admin resumes the node while
# another node is drained by gpuhc: the drain is held back); the metrics
# file gone.
#
# Alert timing: the rules file is loaded unmodified, so an alert with a
# `for:` of minutes only reaches "pending" in a test of seconds; the test
# asserts pending or firing, which proves the expression matches the real
# series. That each alert fires after its `for:` (and not before, and
# not for healthy nodes) is proved by promtool test rules
# (etc/prometheus/gpuhc.rules.test.yml), run here too.
#
# Needs: bin/ built (make build), prometheus, promtool, node_exporter
# (Debian: prometheus prometheus-node-exporter), curl, jq, gcc. Runs no
# service manager; the two daemons are children of this script, on free
# ports from 19100 and 19090, killed on exit. About 20 seconds.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${BIN:-$REPO/bin}
HC=$BIN/gpuhc-healthcheck
RULES=$REPO/etc/prometheus/gpuhc.rules.yml
RULES_TEST=$REPO/etc/prometheus/gpuhc.rules.test.yml
DASHBOARD=$REPO/etc/grafana/gpuhc.json
NODE_EXPORTER=${NODE_EXPORTER:-/usr/bin/prometheus-node-exporter}
PROMETHEUS=${PROMETHEUS:-/usr/bin/prometheus}
PROMTOOL=${PROMTOOL:-/usr/bin/promtool}
NODE=gpu001

N=0 NFAIL=0
ok() { N=$((N + 1)); echo "ok $N - $*"; }
not_ok() { N=$((N + 1)) NFAIL=$((NFAIL + 1)); echo "not ok $N - $*"; }
# quiet CMD...: CMD with its stdout discarded.
quiet() { "$@" >/dev/null; }
# check DESC CMD...: ok when CMD succeeds.
check() {
	local desc=$1
	shift
	if "$@"; then ok "$desc"; else not_ok "$desc"; fi
}

T=$(mktemp -d /tmp/gpuhc-metrics-test.XXXXXX)
PIDS=()
cleanup() {
	local rc=$? pid
	trap - EXIT
	set +e
	for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null; done
	for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null; done
	if ((NFAIL > 0 || rc != 0)); then
		for f in "$T"/*.log "$T"/slurm/calls.log; do
			[[ -f $f ]] && { echo "# --- $f"; tail -n 6 "$f" | sed 's/^/# /'; }
		done
	fi
	rm -rf "$T"
	if ((rc != 0)); then
		echo "not ok - aborted (exit status $rc) after $N tests" >&2
		exit "$rc"
	fi
	echo "# $N tests, $NFAIL failed"
	((NFAIL == 0)) || exit 1
}
trap cleanup EXIT

for tool in "$HC" "$NODE_EXPORTER" "$PROMETHEUS" "$PROMTOOL"; do
	[[ -x $tool ]] || { not_ok "$tool missing (make build; apt-get install prometheus prometheus-node-exporter)"; exit 1; }
done
for tool in curl jq gcc; do
	command -v "$tool" >/dev/null || { not_ok "$tool missing"; exit 1; }
done

# free_port BASE: the first port from BASE on that nothing listens on.
free_port() {
	local p
	for ((p = $1; p < $1 + 100; p++)); do
		if ! (: </dev/tcp/127.0.0.1/"$p") 2>/dev/null; then
			echo "$p"
			return
		fi
	done
	return 1
}
NE_PORT=$(free_port 19100)
PROM_PORT=$(free_port 19090)
NE=http://127.0.0.1:$NE_PORT
PROM=http://127.0.0.1:$PROM_PORT

# wait_until SECONDS CMD...: poll CMD every 0.2 s until it succeeds.
wait_until() {
	local end=$((SECONDS + $1))
	shift
	until "$@"; do
		((SECONDS < end)) || return 1
		sleep 0.2
	done
}

# ---------------------------------------------------------------- the node
mkdir -p "$T/slurm" "$T/textfile"
install -m 0755 "$REPO/test/metrics/scontrol-shim.sh" "$T/slurm/scontrol"
echo "$NODE" >"$T/slurm/node"
echo IDLE >"$T/slurm/state"
: >"$T/slurm/reason"
gcc -shared -fPIC -Wall -Werror -o "$T/libfakecuda.so.1" "$REPO/internal/bandwidth/testdata/fakecuda.c"
cat >"$T/gpuhc.toml" <<EOF
state_dir = "$T/state"
lock_file = "$T/hc.lock"
[events]
file = "$T/events.jsonl"
[metrics]
textfile_dir = "$T/textfile"
[policy]
storm_jitter = "0s"
[slurm]
backend = "scontrol"
scontrol = "$T/slurm/scontrol"
[checks.bandwidth]
libcuda = "$T/libfakecuda.so.1"
size = "4MiB"
iterations = 2
[[checks.bandwidth.floor]]
model = "Fake GPU"
h2d_gbps = 0.2
d2h_gbps = 0.2
d2d_gbps = 0.2
p2p_gbps = 0.0
EOF
PROMFILE=$T/textfile/gpuhc.prom

# hc NAME ARGS...: one health check run as slurmd starts it; its exit
# status goes to $T/NAME.rc, its output to $T/NAME.log.
hc() {
	local name=$1 rc=0
	shift
	env -i PATH=/usr/bin:/bin SLURMD_NODENAME=$NODE FAKECUDA_DEVICES=2 \
		"$HC" --config "$T/gpuhc.toml" --simulate dgxh100 "$@" >"$T/$name.log" 2>&1 || rc=$?
	echo "$rc" >"$T/$name.rc"
}
rc_of() { cat "$T/$1.rc"; }
# prom_file_value SAMPLE: the value of one sample line of gpuhc.prom.
prom_file_value() { awk -v s="$1" '$1 == s { print $2 }' "$PROMFILE"; }

hc healthy
check "healthy run exits 0 and writes gpuhc.prom" test "$(rc_of healthy)" = 0 -a -s "$PROMFILE"
check "promtool check metrics accepts gpuhc.prom" "$PROMTOOL" check metrics <"$PROMFILE"
hc deep --deep
check "healthy --deep run exits 0 and writes bandwidth figures and floors" \
	test "$(rc_of deep)" = 0 -a -n "$(prom_file_value 'gpuhc_measurement_floor{check="bandwidth",component="cuda0/h2d",name="h2d",unit="GB/s"}')"
check "healthy: gpuhc_drained 0, gpuhc_failures_total{gpu.xid} 0" \
	test "$(prom_file_value gpuhc_drained) $(prom_file_value 'gpuhc_failures_total{check="gpu.xid"}')" = "0 0"

# ------------------------------------------------------- the two daemons
"$NODE_EXPORTER" --web.listen-address="127.0.0.1:$NE_PORT" --collector.disable-defaults \
	--collector.textfile --collector.textfile.directory="$T/textfile" >"$T/node_exporter.log" 2>&1 &
PIDS+=($!)
cat >"$T/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - $RULES
scrape_configs:
  - job_name: node
    static_configs:
      - targets: ["127.0.0.1:$NE_PORT"]
EOF
check "promtool check config accepts the test's prometheus.yml" quiet "$PROMTOOL" check config "$T/prometheus.yml"
"$PROMETHEUS" --config.file="$T/prometheus.yml" --storage.tsdb.path="$T/tsdb" \
	--web.listen-address="127.0.0.1:$PROM_PORT" --log.level=warn >"$T/prometheus.log" 2>&1 &
PIDS+=($!)

ne_metrics() { curl -sf --max-time 2 "$NE/metrics"; }
check "node_exporter answers on $NE" wait_until 10 quiet ne_metrics
ne=$(ne_metrics)
check "node_exporter exposes every gpuhc family of a --deep run" bash -c '
	for f in gpuhc_check_status gpuhc_check_duration_seconds gpuhc_failures_total \
		gpuhc_last_run_timestamp_seconds gpuhc_drained gpuhc_drain_suppressed \
		gpuhc_measurement gpuhc_measurement_floor; do
		grep -q "^$f[{ ]" <<<"$1" || { echo "# missing $f"; exit 1; }
	done' _ "$ne"
check "node_exporter read gpuhc.prom without error (node_textfile_scrape_error 0)" \
	grep -qx 'node_textfile_scrape_error 0' <<<"$ne"

# query EXPR: Prometheus's instant query result (the JSON array).
query() {
	curl -sf --max-time 5 -G --data-urlencode "query=$1" "$PROM/api/v1/query" | jq -ce '.data.result'
}
# has_series EXPR: the query returns at least one series.
has_series() { [[ $(query "$1" | jq length) -ge 1 ]]; }
# scalar EXPR: the value of the query's only series.
scalar() { query "$1" | jq -r 'if length == 1 then .[0].value[1] else "none" end'; }
# scalar_is EXPR WANT: the query's only series has the value WANT.
scalar_is() { [[ $(scalar "$1") == "$2" ]]; }
# alert_state NAME [LABEL VALUE]: the states of alert NAME (comma-separated;
# "" when inactive), of the instances with LABEL=VALUE if given.
alert_state() {
	curl -sf --max-time 5 "$PROM/api/v1/alerts" |
		jq -r --arg n "$1" --arg k "${2:-}" --arg v "${3:-}" \
			'[.data.alerts[] | select(.labels.alertname == $n and ($k == "" or .labels[$k] == $v)) | .state] | join(",")'
}
active() { [[ $(alert_state "$@") =~ ^(pending|firing)$ ]]; }
firing() { [[ $(alert_state "$@") == firing ]]; }
inactive() { [[ -z $(alert_state "$@") ]]; }
GPUHC_ALERTS=(GpuhcNodeDrained GpuhcCheckFailing GpuhcCheckError GpuhcNewFailureEpisode
	GpuhcDrainSuppressed GpuhcRunStale GpuhcMetricsAbsent)
# rules_loaded: Prometheus has loaded every alert of the rules file.
rules_loaded() {
	local names
	names=$(curl -sf --max-time 5 "$PROM/api/v1/rules?type=alert" | jq -r '[.data.groups[].rules[].name] | sort | join(" ")') || return 1
	[[ $names == "$(printf '%s\n' "${GPUHC_ALERTS[@]}" | sort | paste -sd' ')" ]]
}

check "Prometheus is up and loaded the 7 alerts of gpuhc.rules.yml" wait_until 20 rules_loaded
check "Prometheus scraped the healthy node (gpuhc_failures_total{gpu.xid} == 0)" \
	wait_until 10 scalar_is 'gpuhc_failures_total{check="gpu.xid"}' 0
# Two rule evaluations on healthy data, then not one gpuhc alert.
sleep 2.5
healthy_silent() {
	local a bad=
	for a in "${GPUHC_ALERTS[@]}"; do
		inactive "$a" || bad+=" $a($(alert_state "$a"))"
	done
	[[ -z $bad ]] || { echo "# active on the healthy node:$bad"; return 1; }
}
check "healthy node: every gpuhc alert is inactive" healthy_silent

# ------------------------------------------------- XID 79 on gpu3: drained
hc fault --inject gpu3:xid=79
check "XID 79 run exits 1 and drains through scontrol" \
	bash -c '[[ $(cat "$1/fault.rc") == 1 ]] && grep -q "^policy: drained: gpuhc: gpu.xid: gpu3 " "$1/fault.log" &&
		[[ $(cat "$1/slurm/state") == IDLE+DRAIN ]]' _ "$T"
check "gpuhc.prom: gpuhc_drained 1, gpu.xid/gpu3 FAIL, one FAIL episode" test \
	"$(prom_file_value gpuhc_drained) $(prom_file_value 'gpuhc_check_status{check="gpu.xid",component="gpu3",status="FAIL"}') $(prom_file_value 'gpuhc_failures_total{check="gpu.xid"}')" = "1 1 1"
check "Prometheus scraped the drain (gpuhc_drained == 1)" wait_until 10 has_series 'gpuhc_drained == 1'
check "GpuhcNodeDrained is pending or firing" wait_until 10 active GpuhcNodeDrained
check "GpuhcCheckFailing is pending or firing for gpu.xid/gpu3" wait_until 10 active GpuhcCheckFailing component gpu3
check "GpuhcCheckFailing is inactive for the healthy gpu0" inactive GpuhcCheckFailing component gpu0
check "GpuhcNewFailureEpisode is firing for gpu.xid (no for:)" wait_until 10 firing GpuhcNewFailureEpisode check gpu.xid
for a in GpuhcCheckError GpuhcDrainSuppressed GpuhcRunStale GpuhcMetricsAbsent; do
	check "$a is inactive on the drained node" inactive "$a"
done

# Every expression of every dashboard panel, with the node variable at
# "All" (allValue .*), returns at least one series.
check "the dashboard is JSON with panels and expressions" \
	test "$(jq '[.panels[].targets[].expr] | length' "$DASHBOARD")" -ge 10
while IFS= read -r line; do
	title=$(jq -r '.t' <<<"$line")
	expr=$(jq -r '.e' <<<"$line")
	expr=${expr//\$instance/.*}
	check "dashboard \"$title\": $expr returns a series" has_series "$expr"
done < <(jq -c '.panels[] | .title as $t | .targets[] | {t: $t, e: .expr}' "$DASHBOARD")
check "dashboard: 1 node drained, 1 component failing" \
	test "$(scalar 'sum(gpuhc_drained)') $(scalar 'count(gpuhc_check_status{status="FAIL"} == 1)')" = "1 1"
check "dashboard: the --deep figures outlive the plain run that removed them" \
	bash -c '! grep -q gpuhc_measurement "$1" && [[ $2 -ge 6 ]]' _ "$PROMFILE" \
	"$(query 'last_over_time(gpuhc_measurement_floor[7d])' | jq length)"

# ------------------------------------- storm guard: the drain is held back
# The admin resumes the node; meanwhile gpu002 was drained by gpuhc, so in
# a cluster of 2 the limit (1 node) is reached.
echo IDLE >"$T/slurm/state"
: >"$T/slurm/reason"
echo "NodeName=gpu002 Arch=x86_64 CPUTot=2 State=IDLE+DRAIN Partitions=gpu Reason=gpuhc: gpu.xid: gpu1: XID 79 GPU has fallen off the bus [root@2026-12-01T10:00:00]" \
	>"$T/slurm/others.txt"
hc storm --inject gpu3:xid=79
check "storm: the run exits 1 and does not drain (policy: drain-suppressed)" \
	bash -c '[[ $(cat "$1/storm.rc") == 1 ]] && grep -q "^policy: drain-suppressed: " "$1/storm.log" &&
		[[ $(cat "$1/slurm/state") == IDLE ]]' _ "$T"
check "storm: gpuhc.prom has gpuhc_drain_suppressed 1, gpuhc_drained 0" \
	test "$(prom_file_value gpuhc_drain_suppressed) $(prom_file_value gpuhc_drained)" = "1 0"
check "GpuhcDrainSuppressed is pending or firing" wait_until 10 active GpuhcDrainSuppressed
check "GpuhcNodeDrained is inactive once the node is resumed" wait_until 10 inactive GpuhcNodeDrained

# --------------------------------------------------- no gpuhc.prom at all
rm "$PROMFILE"
check "no gpuhc.prom: GpuhcMetricsAbsent is pending or firing" wait_until 10 active GpuhcMetricsAbsent

# ------------------------------------------------------------- promtool
check "promtool check rules: gpuhc.rules.yml" quiet "$PROMTOOL" check rules "$RULES"
check "promtool test rules: gpuhc.rules.test.yml" quiet "$PROMTOOL" test rules "$RULES_TEST"

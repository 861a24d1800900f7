#!/usr/bin/env bash
# gpuhc-drain report --html in a real browser (make report-test): Debian's
# chromium, headless, loads the page and
#   - logs no console message (the page has no script, so any message is
#     an error; a copy with a throwing script must be caught),
#   - fetches nothing (Chromium's --log-net-log lists every request the
#     page made; a copy with a remote image and stylesheet must be caught;
#     --proxy-server=127.0.0.1:9 makes any fetch fail besides),
#   - paints a PNG screenshot of the window's size with the charts' colours
#     in it (kept in $ARTIFACTS),
#   - shows in its rendered DOM (--dump-dom: what Chromium parsed and ran,
#     not the file) the figures of `gpuhc-drain stats --json` over the same
#     logs and flags: the fleet row, nodes, events, open drains (node,
#     check, reason), lemons, per-check episodes, per node/type/serial; a
#     copy whose script changes one figure must be caught.
# The logs are test/fleetgen's: 40 nodes over 30 days ending now, seed 1,
# 20 incidents per node-year (83 episodes, 67 drains, 1 still open on
# 2026-12-06; the checks take the open count from the generator's truth),
# lemons, rotated and gzipped logs, torn lines.
# Needs: bin/gpuhc-drain (make build), go, chromium, jq; fonts-dejavu-core
# for readable text. About 10 seconds.
set -u

REPO=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${BIN:-$REPO/bin}
DRAIN=$BIN/gpuhc-drain
CHROMIUM=${CHROMIUM:-chromium}
ARTIFACTS=${ARTIFACTS:-/tmp/gpuhc-report-test}
W=1280 H=1600
FLAGS=(--lemon-min 4)

n=0 failed=0
check() { # check DESCRIPTION COMMAND...
	local what=$1
	shift
	n=$((n + 1))
	if "$@"; then echo "ok $n - $what"; else echo "not ok $n - $what"; failed=$((failed + 1)); fi
}
# quiet CMD...: CMD with its stdout discarded.
quiet() { "$@" >/dev/null; }
# fails DESCRIPTION COMMAND...: ok when the checker COMMAND finds a
# difference (status 1, not a usage or read error): a negative control.
fails() {
	local what=$1
	shift
	check "$what" bash -c '"$@" >/dev/null; [[ $? == 1 ]]' _ "$@"
}

[[ -x $DRAIN ]] || { echo "not ok 0 - $DRAIN missing (make build)"; exit 1; }
for tool in "$CHROMIUM" go jq; do
	command -v "$tool" >/dev/null || { echo "not ok 0 - $tool missing (apt-get install chromium fonts-dejavu-core)"; exit 1; }
done

T=$(mktemp -d /tmp/gpuhc-report-test.XXXXXX)
cleanup() {
	local rc=$?
	trap - EXIT
	rm -rf "$T"
	echo "# $n tests, $failed failed; screenshot: $ARTIFACTS/report.png"
	((failed == 0 && rc == 0)) || exit 1
}
trap cleanup EXIT
mkdir -p "$ARTIFACTS"

# browse NAME MODE PAGE: one headless Chromium run on PAGE, MODE
# --dump-dom (the DOM to $T/NAME.dom) or --screenshot=FILE; its stderr
# (console messages) to $T/NAME.err, its net log to $T/NAME.net. A fresh
# profile each time; never more than 60 s.
browse() {
	local name=$1 mode=$2 page=$3
	rm -rf "$T/profile"
	timeout -k 5 60 "$CHROMIUM" --headless --no-sandbox --disable-gpu --no-first-run \
		--user-data-dir="$T/profile" --disable-background-networking --disable-component-update \
		--proxy-server=127.0.0.1:9 --enable-logging=stderr --v=0 --log-net-log="$T/$name.net" \
		--window-size=$W,$H --hide-scrollbars "$mode" "file://$page" >"$T/$name.dom" 2>"$T/$name.err"
}
# console NAME: the console messages of run NAME (none: status 1).
# Chromium logs them as "INFO:CONSOLE:LINE] ..." (older: "CONSOLE(LINE)").
console() { grep -E ':CONSOLE[:(]' "$T/$1.err"; }
no_console() {
	! console "$1" | sed 's/^/# /' | grep .
}

(cd "$REPO" && go build -o "$T/" ./test/fleetgen ./test/report) || { echo "not ok 0 - go build test/fleetgen test/report"; exit 1; }
CHECKER=$T/report

start=$(date -u -d '-30 days' +%Y-%m-%dT%H:%M:%SZ)
check "fleetgen writes 40 nodes x 30 days with open drains" \
	bash -c '"$1" -nodes 40 -days 30 -seed 1 -rate 20 -start "$2" -out "$3/logs" -truth "$3/truth.json" | tee "$3/fleetgen.out" | grep -qE " \([1-9][0-9]* open\)"' \
	_ "$T/fleetgen" "$start" "$T"
# How many drains the generator left open, from its own ground truth.
OPEN=$(sed -n 's/.* (\([0-9]*\) open).*/\1/p' "$T/fleetgen.out")
check "gpuhc-drain stats --json ${FLAGS[*]}" \
	bash -c '"$1" stats --json --events "$2/logs" "${@:3}" >"$2/stats.json" 2>"$2/stats.err"' _ "$DRAIN" "$T" "${FLAGS[@]}"
check "gpuhc-drain report --html ${FLAGS[*]}" \
	bash -c '"$1" report --html "$2/page.html" --events "$2/logs" "${@:3}" >/dev/null 2>"$2/report.err"' _ "$DRAIN" "$T" "${FLAGS[@]}"
check "the logs have episodes, drains, open drains and lemons" \
	quiet jq -e --argjson open "${OPEN:-0}" '.fleet.episodes > 50 and .fleet.drains > 50 and $open > 0 and .fleet.open == $open and (.lemons | length) >= 3' "$T/stats.json"

# ----------------------------------------------------------- the page
check "chromium --dump-dom loads the page" browse page --dump-dom "$T/page.html"
check "chromium: no console message" no_console page
check "chromium: the page made no request (net log)" "$CHECKER" netlog "$T/page.net"
for part in fleet open lemons checks tables links; do
	check "DOM: $part equals stats --json" "$CHECKER" dom -stats "$T/stats.json" -truth "$T/truth.json" \
		-events "$T/logs" -part "$part" "$T/page.dom"
done
check "chromium --screenshot" browse shot --screenshot="$ARTIFACTS/report.png" "$T/page.html"
check "screenshot: no console message" no_console shot
check "screenshot: a ${W}x$H PNG ($(stat -c %s "$ARTIFACTS/report.png" 2>/dev/null) bytes) with the charts painted" \
	bash -c '[[ $(head -c 8 "$1" | od -An -tx1 | tr -d " ") == 89504e470d0a1a0a ]] && "$2" png -width "$3" -height "$4" "$1"' \
	_ "$ARTIFACTS/report.png" "$CHECKER" "$W" "$H"

# ----------------------------------------------- the negative controls
# inject NAME HTML: a copy of the page with HTML before </body>.
inject() { sed "s|</body>|$2</body>|" "$T/page.html" >"$T/$1.html"; }
inject throws '<script>throw new Error("gpuhc-negative-control")</script>'
browse throws --dump-dom "$T/throws.html"
check "control: a throwing script is caught as a console error" \
	bash -c 'grep -q "Uncaught Error: gpuhc-negative-control" <<<"$1"' _ "$(console throws)"
inject fetches '<img src="http://192.0.2.1/x.png"><link rel="stylesheet" href="https://fonts.invalid/x.css">'
browse fetches --dump-dom "$T/fetches.html"
fails "control: a remote image and stylesheet are caught in the net log" "$CHECKER" netlog "$T/fetches.net"
fails "control: ... and as links in the DOM" "$CHECKER" dom -stats "$T/stats.json" -part links "$T/fetches.dom"
# The fleet's episodes cell, changed by a script after the file is
# parsed: the raw file still has the right figure, the DOM does not.
inject edits '<script>document.querySelector("#fleet-table tr:nth-child(2) td:nth-child(3)").textContent = "-1"</script>'
browse edits --dump-dom "$T/edits.html"
fails "control: a figure changed by a script is caught in the DOM" "$CHECKER" dom -stats "$T/stats.json" -part fleet "$T/edits.dom"

if ((failed > 0)); then
	for f in "$T"/*.err; do echo "# --- $f"; grep -v dbus "$f" | tail -n 5 | sed 's/^/# /'; done
fi

#!/usr/bin/env bash
# End to end through Debian's real rsyslogd: gpuhc-healthcheck and
# gpuhc-drain with [log] syslog on reach rsyslog's file with the configured
# facility, the severity of their level and their tag; with no daemon they
# warn once and run as before. rsyslogd runs on a private socket with a
# private configuration, so the host's own syslog (if any) is untouched.
# Needs: rsyslog (apt-get install rsyslog), bin/ from `make build`.
set -u
BIN=${BIN:-bin}
command -v rsyslogd >/dev/null || { echo "not ok 0 - rsyslogd not found (apt-get install rsyslog)"; exit 1; }
for b in gpuhc-healthcheck gpuhc-drain; do
	[ -x "$BIN/$b" ] || { echo "not ok 0 - $BIN/$b missing (make build)"; exit 1; }
done

dir=$(mktemp -d /tmp/gpuhc-syslog.XXXXXX)
rpid=
cleanup() {
	if [ -n "$rpid" ]; then kill "$rpid" 2>/dev/null; wait "$rpid" 2>/dev/null; fi
	rm -rf "$dir"
}
trap cleanup EXIT

sock=$dir/log.sock
msgs=$dir/messages
cat >"$dir/rsyslog.conf" <<CONF
global(workDirectory="$dir")
module(load="imuxsock" SysSock.Use="off")
input(type="imuxsock" Socket="$sock")
template(name="gpuhc" type="string" string="%syslogfacility-text% %syslogseverity-text% %syslogtag%%msg%\n")
*.* action(type="omfile" file="$msgs" template="gpuhc")
CONF
rsyslogd -n -f "$dir/rsyslog.conf" -i "$dir/rsyslogd.pid" >"$dir/rsyslogd.out" 2>&1 &
rpid=$!
for _ in $(seq 50); do [ -S "$sock" ] && break; sleep 0.1; done

n=0 failed=0
check() { # check DESCRIPTION COMMAND...
	local what=$1; shift
	n=$((n + 1))
	if "$@"; then echo "ok $n - $what"; else echo "not ok $n - $what"; failed=1; fi
}
# wait_for PATTERN: rsyslog writes its file asynchronously.
wait_for() {
	for _ in $(seq 50); do grep -Eq -- "$1" "$msgs" 2>/dev/null && return 0; sleep 0.1; done
	echo "# no line matching: $1"; sed 's/^/#   /' "$msgs" 2>/dev/null
	return 1
}
check "rsyslogd listens on $sock" test -S "$sock" || { sed 's/^/# /' "$dir/rsyslogd.out"; exit 1; }

# A node with one failing check (a required process that is not running):
# a warning with fields, and no Slurm (nothing answers, scontrol fails).
config() { # config SOCKET FACILITY TAG [LEVEL]
	cat <<TOML
state_dir = "$dir/state"
lock_file = "$dir/hc.lock"
[log]
level = "${4:-info}"
syslog = true
syslog_socket = "$1"
syslog_facility = "$2"
syslog_tag = "$3"
[events]
file = "$dir/events.jsonl"
[slurm]
backend = "auto"
url = "http://127.0.0.1:9"
token_file = "$dir/no-token"
scontrol = "/bin/false"
[checks.processes]
required = ["gpuhc-no-such-process"]
TOML
}
config "$sock" local3 "" >"$dir/gpuhc.toml"
config "$sock" user site-hc >"$dir/tagged.toml"
config "$dir/none.sock" daemon "" >"$dir/nodaemon.toml"
config "$sock" local3 hc-quiet error >"$dir/quiet.toml"

hc() { SLURMD_NODENAME=sl001 timeout 20 "$BIN/gpuhc-healthcheck" --config "$1" --node sl001 --dry-run >"$dir/hc.out" 2>"$dir/hc.err"; echo $?; }

rc=$(hc "$dir/gpuhc.toml")
check "gpuhc-healthcheck --dry-run: exit 1 (a check failed), as without syslog" test "$rc" = 1
check "gpuhc-healthcheck: local3.warning, tag gpuhc-healthcheck[pid], message and fields" \
	wait_for '^local3 warning gpuhc-healthcheck\[[0-9]+\]: not running action=drain check=host.processes component=gpuhc-no-such-process node=sl001 status=FAIL$'
check "gpuhc-healthcheck: no syslog warning on stderr" bash -c "! grep -q syslog '$dir/hc.err'"

rc=$(hc "$dir/tagged.toml")
check "syslog_facility user, syslog_tag site-hc" wait_for '^user warning site-hc\[[0-9]+\]: not running action=drain'

timeout 20 "$BIN/gpuhc-drain" list --config "$dir/gpuhc.toml" >"$dir/drain.out" 2>"$dir/drain.err"
rc=$?
check "gpuhc-drain list: exit 3 (Slurm unreachable), as without syslog" test "$rc" = 3
check "gpuhc-drain: local3.warning, tag gpuhc-drain[pid], fields" \
	wait_for '^local3 warning gpuhc-drain\[[0-9]+\]: slurmrestd failed; falling back to scontrol error=".*no-token: no such file or directory" op="list nodes"$'

rc=$(hc "$dir/quiet.toml")
# The drain run's record after it shows rsyslog has written everything
# before; the warning must not be there.
timeout 20 "$BIN/gpuhc-drain" list --config "$dir/tagged.toml" >/dev/null 2>&1
wait_for '^user warning site-hc\[[0-9]+\]: slurmrestd failed' >/dev/null
check "[log] level = error: the warning is in neither stderr nor syslog (exit still 1)" \
	bash -c "[ '$rc' = 1 ] && ! grep -q 'not running' '$dir/hc.err' && ! grep -q hc-quiet '$msgs'"

start=$(date +%s%N)
rc=$(hc "$dir/nodaemon.toml")
ms=$(( ($(date +%s%N) - start) / 1000000 ))
check "no daemon: gpuhc-healthcheck still exits 1 (${ms} ms)" test "$rc" = 1 -a "$ms" -lt 5000
check "no daemon: exactly one warning on stderr" test "$(grep -c 'syslog unavailable; logging to stderr only' "$dir/hc.err")" = 1
check "no daemon: the check's record still on stderr" grep -q 'msg="not running"' "$dir/hc.err"

exit $failed

#!/usr/bin/env bash
# test/prepare.sh - `sudo make prepare`: makes a Debian 12 (bookworm) machine
# ready for every test target (make test, test-race, fuzz-ci, e2e, e2e-load,
# metrics-test, syslog-test, report-test, package, package-test). Run it
# once, as root; a second run changes nothing and takes seconds.
#
#   1. Debian packages: the one list below (PKG_GROUPS; .ci/run calls this
#      script rather than keeping its own), only those missing, with
#      apt-get install --no-install-recommends.
#   2. Go: go.mod's version or newer. Uses /usr/local/go/bin/go or the `go`
#      on PATH if it is Go 1.21 or later (those fetch a newer toolchain
#      themselves, GOTOOLCHAIN=auto); otherwise installs golang-go (Go 1.23,
#      /usr/bin/go) from bookworm-backports. Then checks that `go version`
#      in this repository reports go.mod's version (GOTOOLCHAIN=auto fetches
#      it once through the Go module proxy into root's module cache) and
#      runs go mod download.
#   3. The e2e test-bed chroots, Slurm 24.11 (trixie) and 26.05 (forky),
#      debootstrapped once into /var/cache/gpuhc-testbed
#      (test/e2e/testbed.sh prepare); --no-chroots leaves them to the first
#      `make e2e`.
# What the tests set up themselves (the system user gpuhcrest, munge keys,
# the Debian 11 build root, daemons on fixed ports) is listed up front too;
# nothing of it is needed before, so it is left to them.
#
# Usage: test/prepare.sh [--dry-run] [--no-chroots]
#   --dry-run (or PREPARE_DRY_RUN=1): print what it would do, change nothing;
#             needs no root.
# Environment: GPUHC_TESTBED_CACHE (default /var/cache/gpuhc-testbed), as
# testbed.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export DEBIAN_FRONTEND=noninteractive

# ------------------------------------------------------------ the package list
# "what needs them|packages". The only list: .ci/run installs through here.
# (testbed.sh and install-test.sh still install a missing tool of theirs on
# their own, a subset of this.)
PKG_GROUPS=(
	"build, make test, test-race, fuzz-ci|ca-certificates git make gcc libc6-dev curl jq"
	"make e2e, e2e-load (Slurm; debootstrap)|munge slurmctld slurmd slurmrestd slurm-client slurm-wlm-jwt-plugin libslurm-dev debootstrap debian-archive-keyring util-linux iproute2 procps"
	"make package, package-test|binutils lintian rpm"
	"make metrics-test (promtool: package-test)|prometheus prometheus-node-exporter"
	"make syslog-test|rsyslog"
	"make report-test (headless Chromium)|chromium fonts-dejavu-core"
)
BACKPORTS_LIST=/etc/apt/sources.list.d/gpuhc-backports.list
CACHE=${GPUHC_TESTBED_CACHE:-/var/cache/gpuhc-testbed}
# The fixed 127.0.0.1 TCP ports of the e2e test beds (testbed.sh; load.sh
# adds a proxy at REST+1 and the paper nodes at REST+9).
PORTS_22="16817 16818 16820"
PORTS_24="17817 17821 17822 17823 17824 17830 17831 17839"
PORTS_26="18817 18821 18822 18823 18824 18830 18831 18839"

DRY=0 CHROOTS=1
[[ -n ${PREPARE_DRY_RUN:-} && ${PREPARE_DRY_RUN} != 0 ]] && DRY=1
for a in "$@"; do
	case $a in
	--dry-run | -n) DRY=1 ;;
	--no-chroots) CHROOTS=0 ;;
	-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "test/prepare.sh: unknown argument '$a' (usage: test/prepare.sh [--dry-run] [--no-chroots])" >&2; exit 2 ;;
	esac
done

say() { printf '%s\n' "$*"; }
step() { printf '\n== prepare: %s\n' "$*"; }
die() { echo "test/prepare.sh: $*" >&2; exit 1; }
ver_ge() { [[ $(printf '%s\n%s\n' "$2" "$1" | sort -V | head -1) == "$2" ]]; } # A >= B

if ((!DRY)) && [[ $(id -u) != 0 ]]; then
	echo "test/prepare.sh: must run as root: it installs Debian packages and creates chroots under $CACHE." >&2
	echo "  Run: sudo make prepare    (or: sudo bash test/prepare.sh)" >&2
	echo "  To see what it would do, without root: make prepare PREPARE_DRY_RUN=1  (or: bash test/prepare.sh --dry-run)" >&2
	exit 2
fi

# shellcheck source=/dev/null
CODENAME=$( (. /etc/os-release && echo "${VERSION_CODENAME:-}") 2>/dev/null || true)

# ------------------------------------------------------------ what is there
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
ALL=() MISSING=()
for g in "${PKG_GROUPS[@]}"; do
	for p in ${g#*|}; do
		ALL+=("$p")
		installed "$p" || MISSING+=("$p")
	done
done

# want: go.mod's go line, or its toolchain line if that is newer.
want=$(awk '$1 == "go" {print $2; exit}' go.mod)
tc=$(awk '$1 == "toolchain" {sub(/^go/, "", $2); print $2; exit}' go.mod)
[[ -n $tc ]] && ver_ge "$tc" "$want" && want=$tc
# go_ok BIN: BIN is Go 1.21 or later (can fetch go.mod's toolchain); sets
# GO_OWN to its own version.
go_ok() {
	[[ -x $1 ]] || return 1
	GO_OWN=$(cd / && GOTOOLCHAIN=local "$1" env GOVERSION 2>/dev/null) || return 1
	GO_OWN=${GO_OWN#go}
	ver_ge "$GO_OWN" 1.21
}
GO='' GO_OWN=''
for c in /usr/local/go/bin/go "$(command -v go || true)"; do
	[[ -n $c ]] && go_ok "$c" && { GO=$c; break; }
done

chroot_state() { # DIR: present (with testbed.sh's marker), or what happens
	if [[ -f $1/.gpuhc-testbed-ok ]]; then echo "present ($(du -sh --one-file-system "$1" 2>/dev/null | cut -f1))"
	elif ((CHROOTS)); then echo "absent: will debootstrap, about 0.5 GB, a minute or two"
	else echo "absent: the first make e2e debootstraps it (about 0.5 GB)"; fi
}
port_busy() { (: </dev/tcp/127.0.0.1/"$1") 2>/dev/null; }

# ------------------------------------------------------------ the plan
say "test/prepare.sh: preparing $(hostname -s) (Debian ${CODENAME:-unknown}) for gpuhc's tests$( ((DRY)) && echo ' -- DRY RUN: prints only, changes nothing')"
[[ $CODENAME == bookworm ]] || say "  note: written for Debian 12 (bookworm); this is '${CODENAME:-unknown}': the package names may differ"
say ""
say "1. Debian packages (${#ALL[@]}; apt-get install --no-install-recommends, only the missing; their dependencies come too):"
for g in "${PKG_GROUPS[@]}"; do
	miss=()
	for p in ${g#*|}; do installed "$p" || miss+=("$p"); done
	printf '     %-40s %s\n' "${g%%|*}:" "${g#*|}"
	if ((${#miss[@]})); then printf '     %-40s missing: %s\n' "" "${miss[*]}"; fi
done
if ((${#MISSING[@]})); then
	say "   -> will install ${#MISSING[@]}: ${MISSING[*]}"
	say "      (installing munge creates /etc/munge/munge.key; the Slurm and Prometheus packages may start their services: the tests use their own configs and ports)"
else
	say "   -> all installed; nothing to do"
fi
say ""
say "2. Go: go.mod wants go$want"
if [[ -n $GO ]]; then
	say "   -> have $GO (go$GO_OWN)$(ver_ge "$GO_OWN" "$want" && echo '; nothing to install' || echo "; GOTOOLCHAIN=auto fetches go$want once through the Go module proxy")"
	if [[ $(command -v go || true) != "$GO" ]]; then
		say "      note: not the first go on PATH; put $(dirname "$GO") first (export PATH=$(dirname "$GO"):\$PATH; under sudo: sudo env PATH=\"\$PATH\" make ...), as .ci/run does"
	fi
else
	say "   -> no Go 1.21+ found: will install golang-go (Go 1.23, /usr/bin/go) from bookworm-backports"
	grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/ ||
		say "      (adds $BACKPORTS_LIST and runs apt-get update)"
	say "      then GOTOOLCHAIN=auto (golang-go's default) fetches go$want once through the Go module proxy"
fi
say "   -> go mod download (root's module cache)"
say ""
say "3. e2e test-bed chroots under $CACHE ($(df -h --output=avail "$(d=$CACHE; while [[ ! -d $d ]]; do d=$(dirname "$d"); done; echo "$d")" | tail -1 | tr -d ' ') free):"
say "     $CACHE/trixie  (Slurm 24.11): $(chroot_state "$CACHE/trixie")"
say "     $CACHE/forky   (Slurm 26.05): $(chroot_state "$CACHE/forky")"
((CHROOTS)) || say "   -> --no-chroots: not now"
say ""
say "Left to the tests (they create it when they run; nothing to do now):"
say "   - make e2e, e2e-load: the system user gpuhcrest (slurmrestd refuses root), on the host and in each chroot: $(getent passwd gpuhcrest >/dev/null && echo exists || echo 'absent now')"
say "     munge: the host key /etc/munge/munge.key ($([[ -s /etc/munge/munge.key ]] && echo exists || echo 'absent now; the munge package or testbed.sh creates it')) and one per chroot; a host munged is started only if munge does not work"
say "     state and logs in /tmp/gpuhc-e2e (one run at a time: its .lock); the host's /etc/slurm is never touched; every daemon it starts is stopped at the end"
say "     127.0.0.1 TCP ports: 22.05 $PORTS_22; 24.11 $PORTS_24; 26.05 $PORTS_26"
busy=()
for p in $PORTS_22 $PORTS_24 $PORTS_26; do port_busy "$p" && busy+=("$p"); done
if ((${#busy[@]})); then
	say "     WARNING: in use now: ${busy[*]} (an e2e run in progress, or another service: make e2e fails on these)"
else
	say "     all free now"
fi
say "   - make metrics-test: node_exporter and Prometheus on the first free ports from 19100 and 19090"
say "   - make package: the Debian 11 build root $CACHE/bullseye, about 0.8 GB: $([[ -f $CACHE/bullseye/.gpuhc-buildroot-ok ]] && echo present || echo 'absent now; the first make package debootstraps it')"
say "   - make package-test: installs and purges the gpuhc package (refuses if gpuhc is installed)"

if ((DRY)); then
	say ""
	say "dry run: nothing changed. Run as root without --dry-run to do it: sudo make prepare"
	exit 0
fi

# ------------------------------------------------------------ 1. packages
T0=$SECONDS
if ((${#MISSING[@]})); then
	step "apt-get install ${MISSING[*]}"
	apt-get update -q
	apt-get install -y -q --no-install-recommends "${MISSING[@]}"
	for p in "${MISSING[@]}"; do installed "$p" || die "$p is still not installed"; done
fi

# ------------------------------------------------------------ 2. Go
if [[ -z $GO ]]; then
	[[ $CODENAME == bookworm ]] || die "no Go 1.21+ here, and bookworm-backports is for Debian 12: install Go $want (https://go.dev/dl) into /usr/local/go and rerun"
	step "Go: golang-go from bookworm-backports"
	if ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
		echo 'deb http://deb.debian.org/debian bookworm-backports main' >"$BACKPORTS_LIST"
	fi
	apt-get update -q
	apt-get install -y -q --no-install-recommends -t bookworm-backports golang-go
	hash -r
	c=$(command -v go) || c=''
	go_ok "$c" || die "golang-go from bookworm-backports did not give a Go 1.21+ on PATH"
	GO=$c
fi
export GOTOOLCHAIN=${GOTOOLCHAIN:-auto}
got=$("$GO" version) || die "$GO version failed (GOTOOLCHAIN=$GOTOOLCHAIN; it fetches go$want through the Go module proxy)"
v=$(awk '{print $3}' <<<"$got"); v=${v#go}
ver_ge "$v" "$want" || die "$GO gives go$v here, go.mod wants go$want (GOTOOLCHAIN=$GOTOOLCHAIN: set it to auto, or install Go $want)"
"$GO" mod download || die "go mod download failed (the Go module proxy must be reachable)"
say "Go: $got ($GO; go.mod wants go$want)"

# ------------------------------------------------------------ 3. chroots
if ((CHROOTS)); then
	if [[ -f $CACHE/trixie/.gpuhc-testbed-ok && -f $CACHE/forky/.gpuhc-testbed-ok ]]; then
		say "chroots: both present"
	else
		step "test/e2e/testbed.sh prepare (debootstrap trixie and forky into $CACHE)"
		bash test/e2e/testbed.sh prepare
	fi
fi

say ""
say "prepared in $((SECONDS - T0))s. Now: make test, make test-race, make fuzz-ci; as root: make e2e, make e2e-load, make metrics-test, make syslog-test, make package, make package-test"

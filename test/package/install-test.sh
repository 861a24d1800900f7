#!/usr/bin/env bash
# test/package/install-test.sh - `make package-test`: tests the packages
# that `make package` builds (issue 7). As root on Debian 12:
#   1. builds the packages twice: version V, and V.1 (the upgrade);
#   2. lintian: no errors on the .deb, and no hardening-no-pie;
#   3. dpkg -i V: files, modes and owners, conffile, --version;
#      the Prometheus rules and Grafana dashboard under /usr/share/gpuhc/:
#      the repository's files byte for byte, not conffiles, the rules pass
#      promtool check rules and test rules where installed (if promtool is
#      here: Debian's prometheus package);
#      an edited /etc/gpuhc/gpuhc.toml survives the upgrade to V.1;
#      dpkg -r keeps the config, dpkg -P removes it (and state, logs);
#   4. rpm: file list, modes, owners, config(noreplace), header and
#      scriptlets match the .deb; rpm -i --nodeps --root TMP, modes/owners;
#   (GPUHC_PACKAGE_E2E=1: also e2e scenario 1, Slurm 22.05 on the host, with
#   slurmd running the installed /usr/sbin/gpuhc-healthcheck, -prolog and
#   -epilog, and a job; needs the host test bed's packages)
#   5. portability: each packaged binary's --version, and
#      gpuhc-healthcheck --dry-run --simulate dgxh100, inside the Debian 11
#      build root (glibc 2.31) and the Debian 13 test-bed root (trixie).
# Refuses to run if gpuhc is already installed; purges what it installed.
# Prints PASS:/FAIL: lines and "package-test: N passed, M failed".
# Installs lintian and rpm with apt-get when they are missing.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
REPO=$PWD
T0=$SECONDS
export DEBIAN_FRONTEND=noninteractive
BULLSEYE=${GPUHC_BULLSEYE:-/var/cache/gpuhc-testbed/bullseye}
TRIXIE=${GPUHC_TRIXIE:-/var/cache/gpuhc-testbed/trixie}

pass=0 fail=0
ok() { echo "PASS: $*"; pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }
check() { local what=$1; shift; if "$@"; then ok "$what"; else bad "$what"; fi; }
section() { printf '\n== [%3ds] %s\n' $((SECONDS - T0)) "$*"; }
die() { echo "package-test: $*" >&2; exit 2; }

[[ $(id -u) == 0 ]] || die "must run as root"
if dpkg-query -W -f '${Status}' gpuhc 2>/dev/null | grep -qv 'not-installed'; then
	die "gpuhc is installed on this machine (dpkg); refusing to touch it"
fi
[[ -e /etc/gpuhc || -e /var/lib/gpuhc || -e /var/log/gpuhc ]] &&
	die "/etc/gpuhc, /var/lib/gpuhc or /var/log/gpuhc exists; refusing to touch it"

need=()
command -v lintian >/dev/null || need+=(lintian)
command -v rpm >/dev/null || need+=(rpm)
command -v objdump >/dev/null || need+=(binutils)
command -v debootstrap >/dev/null || need+=(debootstrap)
if ((${#need[@]})); then
	section "apt-get install ${need[*]}"
	apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null || die "apt-get install ${need[*]} failed"
fi

WORK=$(mktemp -d /tmp/gpuhc-package-test.XXXXXX)
installed=0
cleanup() {
	((installed)) && dpkg -P gpuhc >/dev/null 2>&1
	rm -rf "$WORK"
	for r in "$BULLSEYE" "$TRIXIE"; do rm -rf "$r/tmp/gpuhc-package-test"; done
}
trap cleanup EXIT

# ------------------------------------------------------------ build
section "make package (V), then PKG_VERSION=V.1 (the upgrade)"
VERSION=$(git describe --tags --always --dirty 2>/dev/null || echo dev)
make -s package GPUHC_DIST="$WORK/v1" >"$WORK/build1.log" 2>&1 || { tail -30 "$WORK/build1.log"; die "make package failed"; }
deb1=$(ls "$WORK"/v1/gpuhc_*_amd64.deb) rpm1=$(ls "$WORK"/v1/gpuhc-*.x86_64.rpm)
V=$(dpkg-deb -f "$deb1" Version); V=${V%-1}
make -s package GPUHC_DIST="$WORK/v2" PKG_VERSION="$V.1" >"$WORK/build2.log" 2>&1 || { tail -30 "$WORK/build2.log"; die "make package PKG_VERSION=$V.1 failed"; }
deb2=$(ls "$WORK"/v2/gpuhc_*_amd64.deb)
echo "V=$V  $(basename "$deb1") $(basename "$rpm1") $(basename "$deb2")"
grep -E 'bytes|GLIBC' "$WORK/build1.log"
check "upgrade version sorts higher ($V.1-1 > $V-1)" dpkg --compare-versions "$V.1-1" gt "$V-1"

# ------------------------------------------------------------ lintian
section "lintian"
lintian --fail-on error "$deb1" >"$WORK/lintian.out" 2>&1; rc=$?
grep -v 'root privileges' "$WORK/lintian.out"
check "lintian: no errors (exit $rc)" test "$rc" = 0
# A warning, so --fail-on error lets it through: the cgo binaries are
# built as PIE (Makefile, packaging/build.sh) and must stay so.
check "lintian: no hardening-no-pie" bash -c "! grep -q hardening-no-pie '$WORK/lintian.out'"
# Nor any tag, warning or not, about the shipped monitoring examples.
check "lintian: nothing about usr/share/gpuhc/" bash -c "! grep -q 'usr/share/gpuhc/' '$WORK/lintian.out'"

# ------------------------------------------------------------ dpkg
# path mode owner:group, as installed
EXPECT='/usr/sbin/gpuhc-healthcheck 755 root:root
/usr/sbin/gpuhc-prolog 755 root:root
/usr/sbin/gpuhc-epilog 755 root:root
/usr/sbin/gpuhc-drain 755 root:root
/etc/gpuhc 750 root:root
/etc/gpuhc/gpuhc.toml 640 root:root
/etc/logrotate.d/gpuhc 644 root:root
/var/lib/gpuhc 750 root:root
/var/log/gpuhc 750 root:root
/usr/share/doc/gpuhc/slurm.conf.example 644 root:root
/usr/share/doc/gpuhc/plugstack.conf.example 644 root:root
/usr/share/doc/gpuhc/spank/gpuhc_spank.c 644 root:root
/usr/share/doc/gpuhc/spank/BUILD 644 root:root
/usr/share/doc/gpuhc/README.md.gz 644 root:root
/usr/share/doc/gpuhc/copyright 644 root:root
/usr/share/man/man8/gpuhc-healthcheck.8.gz 644 root:root
/usr/share/man/man8/gpuhc-prolog.8.gz 644 root:root
/usr/share/man/man8/gpuhc-epilog.8.gz 644 root:root
/usr/share/man/man8/gpuhc-drain.8.gz 644 root:root
/usr/share/gpuhc/prometheus/gpuhc.rules.yml 644 root:root
/usr/share/gpuhc/prometheus/gpuhc.rules.test.yml 644 root:root
/usr/share/gpuhc/grafana/gpuhc.json 644 root:root'
# The manual: every docs/ page, compressed (packaging/build.sh).
for f in "$REPO"/docs/*.md; do
	EXPECT+=$'\n'"/usr/share/doc/gpuhc/docs/${f##*/}.gz 644 root:root"
done
# installed path, then the repository file it must equal byte for byte
EXAMPLES='/usr/share/gpuhc/prometheus/gpuhc.rules.yml etc/prometheus/gpuhc.rules.yml
/usr/share/gpuhc/prometheus/gpuhc.rules.test.yml etc/prometheus/gpuhc.rules.test.yml
/usr/share/gpuhc/grafana/gpuhc.json etc/grafana/gpuhc.json'
examples_same() { # ROOT: every EXAMPLES file under ROOT equals the repository's
	local root=$1 p src rc=0
	while read -r p src; do
		cmp -s "$root$p" "$REPO/$src" || { echo "  $root$p differs from $src (or is missing)"; rc=1; }
	done <<<"$EXAMPLES"
	return $rc
}
modes_under() { # ROOT: every EXPECT line holds under ROOT
	local root=$1 p m o got rc=0
	while read -r p m o; do
		got=$(stat -c '%a %U:%G' "$root$p" 2>/dev/null) || { echo "  missing: $p"; rc=1; continue; }
		[[ $got == "$m $o" ]] || { echo "  $p: $got, want $m $o"; rc=1; }
	done <<<"$EXPECT"
	return $rc
}
versions_ok() { # PREFIX (a command prefix, e.g. chroot ROOT) DIR
	local b v rc=0
	for b in healthcheck prolog epilog drain; do
		v=$("$@"/gpuhc-$b --version 2>&1) || { echo "  gpuhc-$b --version: $v"; rc=1; continue; }
		[[ $v == "gpuhc-$b $VERSION (commit "*", built "*")" ]] || { echo "  gpuhc-$b --version: $v"; rc=1; }
	done
	return $rc
}

section "dpkg -i V"
dpkg -i "$deb1" >"$WORK/dpkg-i.log" 2>&1; rc=$?
installed=1
check "dpkg -i $(basename "$deb1")" test "$rc" = 0
check "installed files, modes and owners" modes_under ""
check "installed binaries' --version: $VERSION" versions_ok /usr/sbin
check "gpuhc.toml is a conffile" bash -c "dpkg-query -W -f '\${Conffiles}' gpuhc | grep -q '^ /etc/gpuhc/gpuhc.toml '"
check "/usr/share/gpuhc: rules, rules test, dashboard are the repository's, byte for byte" examples_same ""
check "/usr/share/gpuhc: no conffile there (examples, replaced on upgrade)" bash -c "! dpkg-query -W -f '\${Conffiles}' gpuhc | grep -q ' /usr/share/'"
check "/usr/share/gpuhc/grafana/gpuhc.json is a dashboard (JSON with panels)" bash -c 'jq -e ".panels | length > 0" /usr/share/gpuhc/grafana/gpuhc.json >/dev/null'
if command -v promtool >/dev/null; then
	check "promtool check rules /usr/share/gpuhc/prometheus/gpuhc.rules.yml" \
		bash -c 'out=$(promtool check rules /usr/share/gpuhc/prometheus/gpuhc.rules.yml 2>&1) || { echo "$out"; exit 1; }'
	# The test names gpuhc.rules.yml relatively: it runs where installed.
	check "promtool test rules /usr/share/gpuhc/prometheus/gpuhc.rules.test.yml" \
		bash -c 'out=$(cd / && promtool test rules /usr/share/gpuhc/prometheus/gpuhc.rules.test.yml 2>&1) || { echo "$out"; exit 1; }'
else
	echo "SKIP: promtool check/test rules (no promtool: apt-get install prometheus)"
fi
check "installed config passes --check-config" /usr/sbin/gpuhc-healthcheck --check-config
# spank/BUILD's command, as a site would run it, against this host's Slurm.
check "the shipped SPANK source builds as spank/BUILD says, against this host's Slurm headers" \
	cc -O2 -Wall -Werror -fPIC -shared -I/usr/include -o "$WORK/gpuhc_spank.so" /usr/share/doc/gpuhc/spank/gpuhc_spank.c
if [[ ${GPUHC_PACKAGE_E2E:-} == 1 ]]; then
	section "e2e scenario 1 (Slurm 22.05) through the installed /usr/sbin binaries, and a job"
	GPUHC_E2E_ONLY=22 GPUHC_E2E_INSTALLED=1 GPUHC_BIN=/usr/sbin/gpuhc-healthcheck \
		GPUHC_PROLOG=/usr/sbin/gpuhc-prolog GPUHC_EPILOG=/usr/sbin/gpuhc-epilog \
		timeout -k 30 600 bash test/e2e/run.sh >"$WORK/e2e22.log" 2>&1; rc=$?
	grep -E '^(PASS|FAIL):|^e2e:|HealthCheckProgram runs' "$WORK/e2e22.log" | sed 's/^/  /'
	check "e2e scenario 1 through /usr/sbin/gpuhc-{healthcheck,prolog,epilog} (exit $rc)" test "$rc" = 0
fi
check "man gpuhc-healthcheck renders" bash -c "MANWIDTH=80 man -l /usr/share/man/man8/gpuhc-healthcheck.8.gz 2>/dev/null | grep -q -- '--simulate'"

section "upgrade to V.1 keeps an edited gpuhc.toml"
echo '# edited by test/package/install-test.sh' >>/etc/gpuhc/gpuhc.toml
sum=$(sha256sum </etc/gpuhc/gpuhc.toml)
dpkg -i "$deb2" </dev/null >"$WORK/dpkg-up.log" 2>&1; rc=$?
check "dpkg -i $(basename "$deb2") (upgrade)" test "$rc" = 0
check "installed version is $V.1-1" test "$(dpkg-query -W -f '${Version}' gpuhc)" = "$V.1-1"
check "edited gpuhc.toml survived the upgrade" test "$(sha256sum </etc/gpuhc/gpuhc.toml)" = "$sum"
check "modes and owners after the upgrade" modes_under ""

section "dpkg -r keeps the config; dpkg -P removes it"
mkdir -p /var/lib/gpuhc/x && echo '{}' >/var/log/gpuhc/events.jsonl # state and logs, as a node would have
dpkg -r gpuhc >"$WORK/dpkg-r.log" 2>&1; rc=$?
check "dpkg -r gpuhc" test "$rc" = 0
check "binaries gone after dpkg -r" bash -c '! ls /usr/sbin/gpuhc-* 2>/dev/null'
check "/usr/share/gpuhc gone after dpkg -r (examples are not conffiles)" bash -c '! ls -d /usr/share/gpuhc 2>/dev/null'
check "edited gpuhc.toml kept after dpkg -r" test "$(sha256sum </etc/gpuhc/gpuhc.toml 2>/dev/null)" = "$sum"
check "package state rc after dpkg -r" test "$(dpkg-query -W -f '${db:Status-Abbrev}' gpuhc | tr -d ' ')" = rc
dpkg -P gpuhc >"$WORK/dpkg-p.log" 2>&1; rc=$?
installed=0
check "dpkg -P gpuhc" test "$rc" = 0
check "/etc/gpuhc, /var/lib/gpuhc, /var/log/gpuhc gone after dpkg -P" bash -c '! ls -d /etc/gpuhc /var/lib/gpuhc /var/log/gpuhc 2>/dev/null'
check "dpkg knows no gpuhc after dpkg -P" bash -c "! dpkg-query -W -f '\${Status}' gpuhc 2>/dev/null | grep -q installed"

# ------------------------------------------------------------ rpm
section "rpm against the deb"
# "mode owner:group path" of every file and of every directory the package owns.
dpkg-deb -c "$deb1" | awk '{ p = $6; sub(/^\./, "", p); sub(/\/$/, "", p); print $1, $2, p }' |
	sed 's|root/root|root:root|' | sort -k3 >"$WORK/deb.list"
rpm -qp --qf '[%{FILEMODES:perms} %{FILEUSERNAME}:%{FILEGROUPNAME} %{FILENAMES}\n]' "$rpm1" 2>/dev/null | sort -k3 >"$WORK/rpm.list"
# The deb lists every parent directory; the rpm owns only gpuhc's own.
# The lintian overrides are deb-only.
awk '{print $3}' "$WORK/rpm.list" >"$WORK/rpm.paths"
grep -v ' /usr/share/lintian' "$WORK/deb.list" | awk 'NR==FNR {own[$1]; next} $1 ~ /^-/ || ($3 in own)' "$WORK/rpm.paths" - >"$WORK/deb.cmp"
check "rpm -qpl: same files, modes and owners as the deb" diff -u "$WORK/deb.cmp" "$WORK/rpm.list"
check "rpm -qpl lists every deb file" bash -c "diff <(awk '\$1 ~ /^-/ {print \$3}' '$WORK/deb.list' | grep -v /usr/share/lintian) <(rpm -qpl '$rpm1' 2>/dev/null | while read -r f; do grep -q \" \$f\$\" '$WORK/deb.list' && awk -v f=\"\$f\" '\$3 == f && \$1 ~ /^-/ {print f}' '$WORK/deb.list'; done)"
check "rpm: gpuhc.toml is %config(noreplace)" bash -c "rpm -qp --qf '[%{FILEFLAGS:fflags} %{FILENAMES}\n]' '$rpm1' 2>/dev/null | grep -qx 'cn /etc/gpuhc/gpuhc.toml'"
check "rpm: /usr/share/gpuhc files are not %config" bash -c "rpm -qp --qf '[%{FILEFLAGS:fflags} %{FILENAMES}\n]' '$rpm1' 2>/dev/null | awk '\$NF ~ /^\/usr\/share\/gpuhc\// {n++; if (NF > 1 && \$1 ~ /c/) bad++} END {exit !(n == 3 && !bad)}'"
rpmq() { rpm -qp --qf "$1" "$rpm1" 2>/dev/null; }
rpm_id="$(rpmq '%{NAME} %{VERSION}-%{RELEASE} %{SUMMARY}')"
deb_id="$(dpkg-deb -f "$deb1" Package) $(dpkg-deb -f "$deb1" Version) $(dpkg-deb -f "$deb1" Description | head -1)"
check "rpm -qpi: name, version-release, summary match the deb ($rpm_id)" test "$rpm_id" = "$deb_id"
check "rpm -qpi: description matches the deb's" bash -c "diff <(rpm -qp --qf '%{DESCRIPTION}\n' '$rpm1' 2>/dev/null) <(dpkg-deb -f '$deb1' Description | sed '2,\$s/^ //')"
rpm -qpi "$rpm1" 2>/dev/null | sed -n '1,4p;/^Summary/p'
dpkg-deb --ctrl-tarfile "$deb1" | tar -xO ./postrm >"$WORK/deb.postrm"
rpm -qp --scripts "$rpm1" 2>/dev/null >"$WORK/rpm.scripts"
check "rpm -qp --scripts: postuninstall is the deb's postrm, and the only scriptlet" bash -c "
	[[ \$(grep -c 'scriptlet (using' '$WORK/rpm.scripts') == 1 ]] && grep -q '^postuninstall scriptlet' '$WORK/rpm.scripts' &&
	diff <(sed 1d '$WORK/rpm.scripts' | sed '/^\$/d') <(sed '/^\$/d' '$WORK/deb.postrm')"
R=$WORK/rpmroot
mkdir -p "$R"
rpm --root "$R" --initdb >/dev/null 2>&1
rpm -i --nodeps --root "$R" "$rpm1" >"$WORK/rpm-i.log" 2>&1; rc=$?
check "rpm -i --nodeps --root TMP" test "$rc" = 0
check "rpm root: files, modes and owners" modes_under "$R"
check "rpm root: /usr/share/gpuhc files are the repository's, byte for byte" examples_same "$R"
check "rpm root: rpm -q --root sees gpuhc $V" bash -c "rpm -q --root '$R' gpuhc 2>/dev/null | grep -qF 'gpuhc-$V-1'"

# ------------------------------------------------------------ portability
section "portability: Debian 11 (build root) and Debian 13 (test-bed root)"
X=$WORK/extract
dpkg-deb -x "$deb1" "$X"
for root in "$BULLSEYE" "$TRIXIE"; do
	name=$(basename "$root")
	if [[ ! -x $root/bin/sh ]]; then bad "$name root missing at $root (make package / test/e2e/testbed.sh prepare)"; continue; fi
	d=$root/tmp/gpuhc-package-test
	rm -rf "$d"; mkdir -p "$d"
	cp "$X"/usr/sbin/gpuhc-* "$d/"
	sed -e "s|^state_dir = .*|state_dir = \"/tmp/gpuhc-package-test/state\"|" -e "s|^lock_file = .*|lock_file = \"/tmp/gpuhc-package-test/lock\"|" "$X"/etc/gpuhc/gpuhc.toml >"$d/gpuhc.toml"
	glibc=$(chroot "$root" /usr/bin/ldd --version 2>/dev/null | head -1 | awk '{print $NF}')
	# A private mount namespace for /proc and /sys; nothing leaks to the test bed.
	inroot() { unshare --mount --propagation private bash -c 'mount -t proc proc "$1/proc" 2>/dev/null; mount -t sysfs sysfs "$1/sys" 2>/dev/null; r=$1; shift; exec chroot "$r" "$@"' _ "$root" "$@"; }
	check "$name (glibc $glibc): --version of every packaged binary" versions_ok inroot /tmp/gpuhc-package-test
	out=$(inroot /tmp/gpuhc-package-test/gpuhc-healthcheck --config /tmp/gpuhc-package-test/gpuhc.toml --dry-run --simulate dgxh100 2>&1); rc=$?
	echo "$out" | tail -3 | sed 's/^/  /'
	check "$name (glibc $glibc): gpuhc-healthcheck --dry-run --simulate dgxh100 (exit $rc)" \
		bash -c "[[ $rc == 0 ]] && grep -q 'simulated' <<<\"\$1\" && grep -q 'policy (dry run)' <<<\"\$1\"" _ "$out"
	rm -rf "$d"
done

section "done"
echo "package-test: $pass passed, $fail failed ($((SECONDS - T0))s)"
((fail == 0))

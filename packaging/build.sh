#!/usr/bin/env bash
# packaging/build.sh - `make package`: builds dist/gpuhc_<version>_amd64.deb
# and dist/gpuhc-<version>.x86_64.rpm with nfpm.
#
#   - gpuhc-healthcheck (cgo, NVML dlopened at run time) is built inside a
#     debootstrapped Debian 11 root (/var/cache/gpuhc-testbed/bullseye,
#     cached; gcc and glibc 2.31 from bullseye) with the host's Go toolchain
#     and module cache bind-mounted read-only, so it needs only old glibc
#     symbol versions, as PIE (-buildmode=pie, as `make build`: lintian's
#     hardening-no-pie);
#   - gpuhc-drain is built on the host, CGO_ENABLED=0 (the other three load
#     NVML and libcuda through cgo and are built in the bullseye root);
#   - fails if a binary requires a GLIBC_ version newer than 2.17
#     (objdump -T), if a static one is not static, or if one exceeds 16 MB;
#   - man pages come from the programs' --help (packaging/manpage.sh);
#   - nfpm runs as `go run github.com/goreleaser/nfpm/v2/cmd/nfpm@$NFPM_VERSION`
#     so go.mod does not change.
#
# Environment (the Makefile sets all but the last three):
#   VERSION COMMIT DATE LDFLAGS  the build's identity, as in `make build`
#   PKG_VERSION  package version (default: the last vX.Y.Z tag, else
#                0.0.0+git<commit time>.<commit>)
#   GPUHC_DIST   where the packages go (default dist)
#   GPUHC_BULLSEYE  the build root (default /var/cache/gpuhc-testbed/bullseye)
#   DEBIAN_MIRROR   for debootstrap (default http://deb.debian.org/debian)
# Needs root (debootstrap, chroot, mount), debootstrap, binutils (objdump).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
REPO=$PWD

NFPM_VERSION=v2.45.2
MAX_GLIBC=2.17
# A guard against a debug or unstripped build (twice the size or more),
# not a budget: the cgo programs were 11.8–12.0 MiB on 2026-12-06.
MAX_BYTES=$((16 * 1024 * 1024))
ROOT=${GPUHC_BULLSEYE:-/var/cache/gpuhc-testbed/bullseye}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
GO=${GO:-go}
GOROOT_HOST=$($GO env GOROOT)
GOMODCACHE_HOST=$($GO env GOMODCACHE)
export CGO_CFLAGS=${CGO_CFLAGS:-"-O2 -g -Wno-deprecated-declarations"}

VERSION=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
COMMIT=${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
DATE=${DATE:-$(git log -1 --format=%cI 2>/dev/null || echo unknown)}
LDFLAGS=${LDFLAGS:-"-s -w -X github.com/gpuhc/gpuhc/internal/version.Version=$VERSION -X github.com/gpuhc/gpuhc/internal/version.Commit=$COMMIT -X github.com/gpuhc/gpuhc/internal/version.Date=$DATE"}
EPOCH=$(git log -1 --format=%ct 2>/dev/null || echo 0)
if [[ -z ${PKG_VERSION:-} ]]; then
	if tag=$(git describe --tags --abbrev=0 --match 'v[0-9]*' 2>/dev/null); then
		PKG_VERSION=${tag#v}
	else
		PKG_VERSION=0.0.0+git$(TZ=UTC date -d "@$EPOCH" +%Y%m%d%H%M%S).$COMMIT
	fi
fi
[[ $PKG_VERSION =~ ^[0-9][A-Za-z0-9.+~]*$ ]] || { echo "package: bad PKG_VERSION '$PKG_VERSION'" >&2; exit 2; }

T0=$SECONDS
step() { printf '== [%3ds] %s\n' $((SECONDS - T0)) "$*"; }
die() { echo "package: FAIL: $*" >&2; exit 1; }
[[ $(id -u) == 0 ]] || die "needs root (debootstrap, chroot, bind mounts)"
for c in debootstrap objdump readelf chroot unshare gzip; do
	command -v $c >/dev/null || die "$c not found (apt-get install debootstrap binutils)"
done

# ------------------------------------------------------------ build root
ensure_root() {
	[[ -f $ROOT/.gpuhc-buildroot-ok ]] && return
	step "debootstrap bullseye into $ROOT (once; cached)"
	rm -rf "$ROOT.tmp"
	mkdir -p "$(dirname "$ROOT")"
	debootstrap --variant=minbase --include=gcc,libc6-dev bullseye "$ROOT.tmp" "$MIRROR" >"$ROOT.log" 2>&1 ||
		{ tail -20 "$ROOT.log" >&2; die "debootstrap bullseye failed (log $ROOT.log)"; }
	rm -rf "$ROOT"
	mv "$ROOT.tmp" "$ROOT"
	touch "$ROOT/.gpuhc-buildroot-ok"
}
ensure_root

STAGE=$REPO/dist/stage
DIST=${GPUHC_DIST:-dist}
mkdir -p "$DIST"
rm -rf "$STAGE" "$DIST"/gpuhc_*.deb "$DIST"/gpuhc-*.rpm
mkdir -p "$STAGE/usr/sbin" "$STAGE/usr/share/man/man8" "$STAGE/usr/share/doc/gpuhc"

# ------------------------------------------------------------ binaries
step "go mod download (host module cache, bind-mounted read-only into the build root)"
$GO mod download

step "gpuhc-healthcheck, -prolog, -epilog: cgo (NVML, CUDA driver API), in the bullseye root ($(chroot "$ROOT" ldd --version | head -1))"
# A private mount namespace: every bind mount vanishes with the build.
unshare --mount --propagation private bash -euo pipefail -c '
	root=$1 repo=$2 goroot=$3 modcache=$4 out=$5
	robind() { mkdir -p "$2"; mount --bind "$1" "$2"; mount -o remount,bind,ro "$2"; }
	robind "$repo" "$root/src"
	robind "$goroot" "$root/opt/go"
	robind "$modcache" "$root/gomod"
	mkdir -p "$root/out"; mount --bind "$out" "$root/out"
	mount -t proc proc "$root/proc"
	mount --bind /dev "$root/dev"
	shift 5
	chroot "$root" /usr/bin/env -i PATH=/opt/go/bin:/usr/bin:/bin HOME=/root \
		GOROOT=/opt/go GOMODCACHE=/gomod GOCACHE=/root/.cache/go-build \
		GOFLAGS=-mod=readonly GOPROXY=off GOTOOLCHAIN=local GOTELEMETRY=off \
		CGO_ENABLED=1 CGO_CFLAGS="$CGO_CFLAGS" \
		sh -c "cd /src && for p in healthcheck prolog epilog; do go build -buildmode=pie -trimpath -buildvcs=false -ldflags \"\$1\" -o /out/gpuhc-\$p ./\$p || exit 1; done" sh "$1"
' build "$ROOT" "$REPO" "$GOROOT_HOST" "$GOMODCACHE_HOST" "$STAGE/usr/sbin" "$LDFLAGS"

for p in drain; do
	step "gpuhc-$p: CGO_ENABLED=0, host"
	CGO_ENABLED=0 $GO build -trimpath -buildvcs=false -ldflags "$LDFLAGS" -o "$STAGE/usr/sbin/gpuhc-$p" ./$p
done

# ------------------------------------------------------------ checks
step "checks: GLIBC_ <= $MAX_GLIBC, static where CGO_ENABLED=0, size <= 16 MB, --version"
for f in "$STAGE"/usr/sbin/gpuhc-*; do
	b=$(basename "$f")
	size=$(stat -c %s "$f")
	objdump -h "$f" | grep -q '\.debug_' && die "$b: not stripped"
	((size <= MAX_BYTES)) || die "$b: $size bytes, over 16 MB"
	if [[ $b != gpuhc-drain ]]; then
		need=$(objdump -T "$f" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -1)
		[[ -n $need ]] || die "$b: no GLIBC_ symbol versions (not dynamic?)"
		[[ $(printf '%s\n%s\n' "$need" "$MAX_GLIBC" | sort -V | tail -1) == "$MAX_GLIBC" ]] ||
			die "$b: requires GLIBC_$need, newer than $MAX_GLIBC: $(objdump -T "$f" | grep -o 'GLIBC_[0-9][0-9.]*' | sort -uV | tr '\n' ' ')"
		libs=$(objdump -p "$f" | awk '/NEEDED/ {print $2}' | tr '\n' ' ')
		# ELF type DYN: position-independent (-buildmode=pie).
		[[ $(LC_ALL=C readelf -h "$f" | awk '/^ *Type:/ {print $2}') == DYN ]] || die "$b: not a PIE (readelf -h: $(readelf -h "$f" | grep 'Type:'))"
		printf '   %-18s %9d bytes  dynamic PIE, needs GLIBC_%s at most; NEEDED: %s\n' "$b" "$size" "$need" "$libs"
	else
		objdump -p "$f" | grep -q NEEDED && die "$b: dynamically linked, expected static"
		printf '   %-18s %9d bytes  static\n' "$b" "$size"
	fi
	v=$("$f" --version) || die "$b --version failed"
	[[ $v == "$b $VERSION (commit $COMMIT, built $DATE)" ]] || die "$b --version says '$v'"
done

# ------------------------------------------------------------ man pages, docs
step "man pages from --help, docs"
MANDATE=$(TZ=UTC date -d "@$EPOCH" +%Y-%m-%d)
for f in "$STAGE"/usr/sbin/gpuhc-*; do
	b=$(basename "$f")
	bash packaging/manpage.sh "$f" "$b" "$PKG_VERSION" "$MANDATE" >"$STAGE/usr/share/man/man8/$b.8"
	gzip -9n "$STAGE/usr/share/man/man8/$b.8"
done
doc=$STAGE/usr/share/doc/gpuhc
cp README.md "$doc/README.md"
cp packaging/doc/slurm.conf "$doc/slurm.conf.example"
cp etc/plugstack.conf.d/gpuhc.conf "$doc/plugstack.conf.example"
# The SPANK plugin must be built against the site's own Slurm (its plugin
# version is checked at load), so the source ships, not a .so.
# nfpm flattens a directory's subdirectories, so the plugin's files are
# staged apart and mapped to /usr/share/doc/gpuhc/spank/ on their own.
mkdir -p "$STAGE/spank"
cp spank/gpuhc_spank.c "$STAGE/spank/gpuhc_spank.c"
cp packaging/doc/spank-build.txt "$STAGE/spank/BUILD"
cp packaging/doc/copyright "$doc/copyright"
# The manual the README links to, staged apart like the plugin (nfpm
# flattens subdirectories) and compressed like the README, as Debian's
# policy asks of documentation over 4 kB.
mkdir -p "$STAGE/docs"
for f in docs/*.md; do
	gzip -9n <"$f" >"$STAGE/docs/${f#docs/}.gz"
done
{
	printf 'gpuhc (%s-1) unstable; urgency=medium\n\n' "$PKG_VERSION"
	printf '  * Built from commit %s (%s).\n\n' "$COMMIT" "$VERSION"
	printf ' -- gpuhc maintainers <gpuhc@example.org>  %s\n' "$(LC_ALL=C TZ=UTC date -R -d "@$EPOCH")"
} | gzip -9n >"$doc/changelog.Debian.gz"
gzip -9n "$doc/README.md"
find "$STAGE" -exec touch -h -d "@$EPOCH" {} +

# ------------------------------------------------------------ packages
step "nfpm $NFPM_VERSION: deb and rpm (version $PKG_VERSION)"
export GPUHC_PKG_VERSION=$PKG_VERSION SOURCE_DATE_EPOCH=$EPOCH
nfpm() { GOFLAGS= $GO run "github.com/goreleaser/nfpm/v2/cmd/nfpm@$NFPM_VERSION" "$@"; }
nfpm package --config packaging/nfpm.yaml --packager deb --target "$DIST/gpuhc_${PKG_VERSION}_amd64.deb"
nfpm package --config packaging/nfpm.yaml --packager rpm --target "$DIST/gpuhc-${PKG_VERSION}.x86_64.rpm"

step "done"
ls -l "$DIST"/gpuhc_*.deb "$DIST"/gpuhc-*.rpm
sha256sum "$DIST"/gpuhc_*.deb "$DIST"/gpuhc-*.rpm

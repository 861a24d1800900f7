# gpuhc build, test and measurement entry points.
GO        ?= go
BIN       := bin
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT    ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
DATE      ?= $(shell git log -1 --format=%cI 2>/dev/null || echo unknown)
LDFLAGS   := -s -w -X github.com/gpuhc/gpuhc/internal/version.Version=$(VERSION) \
             -X github.com/gpuhc/gpuhc/internal/version.Commit=$(COMMIT) \
             -X github.com/gpuhc/gpuhc/internal/version.Date=$(DATE)
# gpuhc-healthcheck, -prolog and -epilog link NVML through cgo (the library
# itself is dlopened at run time) and are position-independent (PIE), so
# ASLR moves their code too: they run as root, and Debian's hardening
# (lintian's hardening-no-pie) expects it. gpuhc-drain is static.
CGO_PROGRAMS    := healthcheck prolog epilog
STATIC_PROGRAMS := drain
# go-nvml's header marks calls deprecated that we never make; keep builds quiet.
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations

.PHONY: all build test test-race fuzz fuzz-ci e2e bench lint clean package package-test docs
all: build

build:
	@mkdir -p $(BIN)
	@for p in $(CGO_PROGRAMS); do \
		CGO_ENABLED=1 $(GO) build -buildmode=pie -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/gpuhc-$$p ./$$p || exit 1; \
	done
	@for p in $(STATIC_PROGRAMS); do \
		CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/gpuhc-$$p ./$$p || exit 1; \
	done

test:
	$(GO) vet ./...
	$(GO) test -count=1 ./...

test-race:
	$(GO) test -race -count=1 ./...

# Every native fuzz target (func FuzzXxx in a _test.go file), each for
# FUZZTIME: Go fuzzes one target per invocation, so the targets are listed
# with `go test -list` and a new one is picked up without editing this.
# `make test` runs the seed corpora (f.Add, testdata/fuzz/) already; a
# crasher found here is written to the package's testdata/fuzz/FuzzXxx/:
# keep it, it becomes a regression input. A bare "context deadline
# exceeded" without a failing input is Go's own race at the end of
# -fuzztime (golang/go#75804, fixed in Go 1.27), not a finding: it is
# reported and not counted. fuzz-ci: 10 s a target.
FUZZTIME ?= 60s
fuzz:
	@out=$$($(GO) test -list '^Fuzz' ./... 2>&1) || { echo "$$out" >&2; exit 1; }; \
	list=$$(echo "$$out" | awk '/^Fuzz/ { n[++k] = $$1; next } /^ok / { for (i = 1; i <= k; i++) print $$2, n[i]; k = 0 }'); \
	[ -n "$$list" ] || { echo "fuzz: no fuzz targets found" >&2; exit 1; }; \
	echo "$$list" | { \
		failed=; log=$$(mktemp); trap 'rm -f "$$log"' EXIT; \
		while read -r pkg name; do \
			echo "== fuzz $$pkg $$name ($(FUZZTIME))"; \
			if $(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $$pkg >"$$log" 2>&1 </dev/null; then \
				tail -n 3 "$$log"; \
			elif grep -q 'context deadline exceeded' "$$log" && ! grep -q 'Failing input written' "$$log"; then \
				tail -n 5 "$$log"; \
				echo "fuzz: $$name: no input failed; Go < 1.27 fails a target when -fuzztime ends mid-call (golang/go#75804): not counted"; \
			else \
				cat "$$log"; failed="$$failed $$pkg.$$name"; \
			fi; \
		done; \
		[ -z "$$failed" ] || { echo "fuzz: FAILED:$$failed" >&2; exit 1; }; \
	}

fuzz-ci:
	$(MAKE) fuzz FUZZTIME=10s

e2e: build
	bash test/e2e/run.sh

# Once per machine, as root (sudo make prepare): the Debian packages every
# test target needs, a Go that reaches go.mod's version, the e2e chroots
# (test/prepare.sh). PREPARE_DRY_RUN=1 only prints what it would do.
.PHONY: prepare
prepare:
	bash test/prepare.sh

# gpuhc-healthcheck and gpuhc-drain through a private, real rsyslogd
# (apt-get install rsyslog): facility, severity, tag, a missing daemon.
.PHONY: syslog-test
syslog-test: build
	bash test/syslog/run.sh

# A fleet-sized storm against real Slurm (26.05 bed; LOAD_BED=24 for 24.11):
# 1000 paper nodes, 200 failing health checks at once (test/e2e/load.sh).
.PHONY: e2e-load
e2e-load: build
	bash test/e2e/load.sh $(LOAD_BED)

# The metrics on the real stack, in about 20 s: gpuhc-healthcheck runs
# (simulated DGX H100, healthy then XID 79) under Debian's node_exporter
# and Prometheus, the alert rules and their promtool tests, and every
# Grafana panel's query (test/metrics/run.sh; needs the Debian packages
# prometheus and prometheus-node-exporter, curl, jq, gcc).
.PHONY: metrics-test
metrics-test: build
	bash test/metrics/run.sh

# The report page in Debian's headless chromium, in about 15 s: no console
# error, no fetch, a screenshot ($ARTIFACTS, default /tmp/gpuhc-report-test)
# and the rendered DOM's figures equal to stats --json, each check proved
# by a negative control (test/report/run.sh; needs chromium, jq).
.PHONY: report-test
report-test: build
	bash test/report/run.sh

# On a GPU machine: real NVML, a dry run, timings; changes nothing (see
# docs/hardware-validation.md). Results under $OUT if set.
.PHONY: gpu-smoke
gpu-smoke:
	bash test/gpu-smoke.sh

bench: build
	$(GO) run ./test/bench -bin $(BIN)/gpuhc-healthcheck -runs 30 -dry-run=true
	$(GO) run ./test/bench -bin $(BIN)/gpuhc-healthcheck -runs 30 -dry-run=false
	$(GO) run ./test/bench -bin $(BIN)/gpuhc-healthcheck -runs 30 -dry-run=false -simulate dgxh100
	$(GO) run ./test/bench -kmsg -runs 50
	$(GO) run ./test/bench -bin $(BIN)/gpuhc-healthcheck -runs 30 -ib
	$(GO) run ./test/bench -bin $(BIN)/gpuhc-healthcheck -runs 3 -config
	$(GO) run ./test/bench/stats -nodes 10000 -days 365 -bin $(BIN)/gpuhc-drain

# DEB and RPM in dist/ (packaging/build.sh: root, debootstrap, binutils; the
# cgo binary is built in a cached Debian 11 root for glibc <= 2.17 symbols).
# PKG_VERSION overrides the package version.
package:
	VERSION='$(VERSION)' COMMIT='$(COMMIT)' DATE='$(DATE)' LDFLAGS='$(LDFLAGS)' \
		GO='$(GO)' bash packaging/build.sh

# Install, upgrade, remove and purge the .deb; check the .rpm; run the
# binaries in Debian 11 and 13 roots (test/package/install-test.sh).
package-test:
	bash test/package/install-test.sh

# The SPANK plugin (spank/gpuhc_spank.c; C only, no Go): --gpu-health for
# srun/sbatch/salloc. Slurm loads a plugin only if it was built against the
# same major.minor (plugin_version = SLURM_VERSION_NUMBER), so build one per
# Slurm release series: SLURM_INCLUDE is the directory holding slurm/spank.h
# (default: the host's libslurm-dev); SPANK_SO is the output. For example the
# Slurm 24.11 headers, from Debian 13's libslurm-dev unpacked (no install):
#   apt-get download libslurm-dev && dpkg-deb -x libslurm-dev_*.deb /tmp/s24
#   make spank SLURM_INCLUDE=/tmp/s24/usr/include SPANK_SO=/tmp/s24/gpuhc_spank.so
# (test/e2e/spank.sh does this inside the 24.11 test bed and caches it.)
SLURM_INCLUDE ?= /usr/include
SPANK_SO      ?= spank/gpuhc_spank.so
.PHONY: spank
spank:
	@test -f '$(SLURM_INCLUDE)/slurm/spank.h' || { echo "spank: no $(SLURM_INCLUDE)/slurm/spank.h (install libslurm-dev or set SLURM_INCLUDE)" >&2; exit 1; }
	$(CC) -O2 -g -Wall -Wextra -Werror -fPIC -shared -I'$(SLURM_INCLUDE)' -o '$(SPANK_SO)' spank/gpuhc_spank.c

# docs/configuration.md from the schema (internal/config) and the comments
# of etc/gpuhc.toml; `make test` fails while it is stale.
docs:
	$(GO) generate ./internal/config/...

lint:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

clean:
	rm -rf $(BIN) dist

# pml — container-isolated execution broker for MCP tools.
#
#   make demo    set up everything on a fresh Debian machine and show a real session
#   make test    set up everything and run the unit and e2e tests (on the real daemon;
#                the e2e fault and matrix tests are make test-all's, .ci/e2e.sh)
#   make bench   benchmarks against baselines: bench/report.md and .json

SHELL   := /bin/bash
GO      ?= go
BIN     := bin/pml
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)
export PATH := /usr/local/go/bin:$(PATH)

.PHONY: all build inside cross dist qemu-user docker images images-base images-node images-python images-test images-deno registry-bin demo test unit e2e vet fmt-check bench clean test-podman podman-down release release-tools test-release release-tag

all: build

# pml embeds its in-container program (cmd/pml-inside) for both Linux
# architectures, so the two are built first.
build: inside
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/pml

# The program that runs inside pml's containers (toolbox agent, stdio shim,
# supervisors): static, small (-tags pml_inside leaves the MCP SDK out), one
# per daemon architecture, in bin/, and gzipped (-n: the same bytes every
# build) where internal/inside embeds it, with its digest and length
# beside it (.gz.sha256: pml names the program by it without reading the
# 2.7 MB into its memory; without it pml computes it). The old digest
# goes first and the new one comes last, so the two never disagree. A
# program that came out the same as the one there (and has its digest)
# leaves both files untouched: make test runs this again (make vet)
# while the e2e tests compile, and a digest removed under that compile's
# embed failed it ("embed ...gz.sha256: no such file").
INSIDE_DIR   := internal/inside/programs
INSIDE_ARCHS := amd64 arm64
inside:
	@for a in $(INSIDE_ARCHS); do \
	  gz=$(INSIDE_DIR)/pml-inside-linux-$$a.gz; tmp=$(INSIDE_DIR)/.pml-inside-linux-$$a.gz.tmp; \
	  CGO_ENABLED=0 GOOS=linux GOARCH=$$a $(GO) build -tags pml_inside -trimpath -ldflags '-s -w' \
	    -o bin/pml-inside-linux-$$a ./cmd/pml-inside && \
	  gzip -9n -c bin/pml-inside-linux-$$a > $$tmp && \
	  sum=$$({ sha256sum || shasum -a 256; } < $$tmp 2>/dev/null | cut -c1-64) && \
	  len=$$(wc -c < $$tmp | tr -d ' ') || exit 1; \
	  if [ "$$(cat $$gz.sha256 2>/dev/null)" = "$$sum $$len" ] && cmp -s $$tmp $$gz; then rm -f $$tmp; continue; fi; \
	  rm -f $$gz.sha256 && \
	  mv $$tmp $$gz || exit 1; \
	  case "$$sum" in ????????????????????????????????????????????????????????????????) echo "$$sum $$len" > $$tmp.sha256 && mv $$tmp.sha256 $$gz.sha256;; esac; done

# pml for every platform it supports, each vetted (so a Linux-only system
# call cannot slip back in), into dist/; the linux/arm64 one is run under
# qemu-user-static (Debian's, installed when missing) and must print its
# version. vet gets the build's flags (CGO_ENABLED=0, -trimpath) so that it
# reuses the packages the build just compiled: with other flags every
# dependency is compiled twice per platform (about 95 s each from nothing).
PLATFORMS := darwin/arm64 darwin/amd64 linux/arm64 linux/amd64 windows/amd64
DIST      := dist
cross: inside
	@set -e; mkdir -p $(DIST); for t in $(PLATFORMS); do \
	  os=$${t%/*}; arch=$${t#*/}; ext=; [ $$os = windows ] && ext=.exe; \
	  echo "cross: pml for $$t, go vet" >&2; \
	  GOOS=$$os GOARCH=$$arch CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(DIST)/pml-$$os-$$arch$$ext ./cmd/pml; \
	  GOOS=$$os GOARCH=$$arch CGO_ENABLED=0 $(GO) vet -trimpath ./...; done
	@$(MAKE) --no-print-directory qemu-user
	@out=$$(qemu-aarch64-static $(DIST)/pml-linux-arm64 version) || { echo "cross: pml-linux-arm64 version failed under qemu-aarch64-static: $$out" >&2; exit 1; }; \
	case "$$out" in *"$(VERSION)"*linux/arm64*|*linux/arm64*"$(VERSION)"*) echo "cross: linux/arm64 under qemu: $$(echo "$$out" | tr '\n' ' ')" >&2;; \
	  *) echo "cross: pml-linux-arm64 version under qemu printed no \"$(VERSION)\" and linux/arm64: $$out" >&2; exit 1;; esac

# The five binaries and their checksums (dist/ is not committed).
dist: cross
	cd $(DIST) && sha256sum pml-darwin-arm64 pml-darwin-amd64 pml-linux-arm64 pml-linux-amd64 pml-windows-amd64.exe > SHA256SUMS
	@cat $(DIST)/SHA256SUMS

qemu-user:
	@command -v qemu-aarch64-static >/dev/null || bash .ci/apt.sh qemu-user-static

# Start a Docker engine when none answers (installs Debian's docker.io if needed).
docker:
	@bash .ci/dockerd.sh

# pml's own images, built locally without any registry, plus the Node.js
# image for npm-packaged MCP servers, the Deno runtime for code run locally
# and the test servers' images.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
images: build docker images-base images-test images-deno
	@bash .ci/apt.sh busybox-static
	$(BIN) images build --busybox /bin/busybox

# pml/node:18: debootstrapped Debian bookworm with nodejs + npm from the npm
# registry (about 2 minutes the first time; skipped when the image exists).
images-node: docker
	@bash images/node/build.sh

# pml/python:3.11: debootstrapped Debian bookworm with python3 and pip, for
# Python MCP servers (uvx, python -m, pml add pypi:); skipped when it exists.
images-python: docker
	@bash images/python/build.sh

# Both debootstrapped images at once: each spends most of its minute or two
# waiting on the Debian mirror, so on a fresh machine side by side saves one
# of them. Each script logs under its own prefix; either failing fails this.
images-base: docker
	@bash images/node/build.sh & n=$$!; bash images/python/build.sh & p=$$!; \
	  wait $$n || { wait $$p; exit 1; }; wait $$p

# pml/deno:2.9.6: the deno binary from npm's @deno/linux-x64-glibc and its
# glibc libraries, FROM scratch, for code run locally (execute_locally);
# the npm tarball is cached in ~/.cache/pml/deno; skipped when the image exists.
images-deno: docker
	@bash images/deno/build.sh

# pml-test/{everything,memory,filesystem}: real MCP servers as FROM scratch
# images, and their static binaries in bin/testservers/ for native baselines;
# pml-test/curl:bookworm: Debian's curl added to pml/node:18, a client of the
# egress tests.
images-test: docker images-base
	@bash e2e/testservers/build.sh
	@bash e2e/testservers/curl.sh

# A real OCI registry (go-containerregistry's, blobs on disk, loopback only)
# for the `pml images` e2e tests, built from the Go module proxy in a
# throwaway module (e2e/registry/build.sh; seconds) and cached outside the
# tree so fresh clones and .ci/run reuse it; skipped when it exists.
REGISTRY_VERSION := v0.22.1
REGISTRY_BIN ?= $(HOME)/.cache/pml/bin/registry-ggcr-$(REGISTRY_VERSION)
export PML_REGISTRY_BIN := $(REGISTRY_BIN)
registry-bin:
	@if [ -x "$(REGISTRY_BIN)" ]; then echo "registry binary: $(REGISTRY_BIN) (cached)"; else \
	  echo "building the OCI registry (go-containerregistry $(REGISTRY_VERSION)) into $(REGISTRY_BIN), once" >&2; \
	  bash e2e/registry/build.sh "$(REGISTRY_BIN)" $(REGISTRY_VERSION); fi

demo: images
	$(BIN) demo

# Releases (.goreleaser.yaml): GoReleaser and cyclonedx-gomod (the SBOMs)
# are Go tools, each of its own module file, tools/goreleaser/go.mod and
# tools/cyclonedx/go.mod (their versions pinned there; modules of their own
# because their dependencies would move pml's to other versions), run as
# `go tool -modfile=tools/X/go.mod X`: Go builds each once into its cache
# and reuses it.
GORELEASER := $(GO) tool -modfile=tools/goreleaser/go.mod goreleaser
CYCLONEDX := $(GO) tool -modfile=tools/cyclonedx/go.mod cyclonedx-gomod
# Under a lock: CI builds these in the background while earlier stages
# run, and a stage that needs them waits here for that build to finish
# instead of starting a second one.
release-tools:
	@mkdir -p $(HOME)/.cache/pml/bin
	@flock $(HOME)/.cache/pml/bin/.release-tools.lock $(MAKE) --no-print-directory release-tools-locked
.PHONY: release-tools-locked
release-tools-locked:
	@$(GORELEASER) --version | grep -m1 '^GitVersion' >&2
	@$(CYCLONEDX) version | grep -m1 '^Version' | sed 's/^/cyclonedx-gomod /' >&2

# A release into dist/release: the five platforms' archives, checksums.txt
# (signed with cosign, keyless, when a GitHub Actions OIDC token is there),
# an SBOM per archive, .deb and .rpm, install.sh, the Homebrew formula and
# the Scoop manifest. .ci/release.sh runs GoReleaser: on a commit tagged
# vX.Y.Z (make release-tag) in the release workflow it publishes
# (.github/workflows/release.yml); anywhere else, or with SNAPSHOT=1
# (test-release), it is a snapshot: offline, unsigned (it says so),
# nothing published.
release: release-tools
	bash .ci/release.sh $$([ "$(SNAPSHOT)" = 1 ] && echo --snapshot)

# make release-tag TAG=v1.2.3: tags a commit that is HEAD plus the generated
# in-container program (gitignored on branches), so that the module the Go
# proxy serves for the tag carries it and `go install …@v1.2.3` gives a pml
# whose tools work (docs/architecture.md). The work tree and branch are left
# alone; then `git checkout v1.2.3 && make release`.
release-tag: inside
	@case "$(TAG)" in v[0-9]*.[0-9]*.[0-9]*) ;; *) echo "release-tag: TAG=vMAJOR.MINOR.PATCH is needed (got \"$(TAG)\")" >&2; exit 2;; esac
	@set -e; idx=$$(mktemp); trap 'rm -f $$idx' EXIT; export GIT_INDEX_FILE=$$idx; \
	  git read-tree HEAD; git add -f $(INSIDE_DIR)/pml-inside-linux-*.gz $(INSIDE_DIR)/pml-inside-linux-*.gz.sha256; \
	  c=$$(git commit-tree $$(git write-tree) -p HEAD -m "release $(TAG): the in-container program, for go install"); \
	  git tag -a "$(TAG)" -m "pml $(TAG)" $$c; echo "tagged $(TAG) at $$c (HEAD plus $(INSIDE_DIR)/*.gz)"

# The release checks (e2e/release, build tag release): make release as a
# snapshot (even on a tag), then every archive's pml runs (linux/arm64 under qemu), the
# checksums verify, the .deb installs with dpkg into a throwaway root,
# install.sh and pml upgrade work against the snapshot served on loopback,
# and go install from a module proxy made of this checkout gives a working
# pml. Not part of `make test` (the snapshot takes minutes).
test-release: build images qemu-user
	$(MAKE) --no-print-directory release SNAPSHOT=1
	@bash .ci/apt.sh shellcheck && shellcheck install.sh && echo "test-release: install.sh is shellcheck-clean" >&2
	PML_BIN=$(CURDIR)/$(BIN) PML_RELEASE_DIST=$(CURDIR)/$(DIST)/release $(GO) test -tags release -race -count=1 -timeout 30m -v ./e2e/release/

# The same flags as `build` (see cross), so the two share compiled packages.
# Then staticcheck, a Go tool of this module (go.mod's tool line pins its
# version; its results are cached in ~/.cache/staticcheck), with the same
# flags again: it loads every package and its tests through `go list
# -export`, which compiles them; with Go's defaults (cgo on, no -trimpath)
# that was a third compile of the whole tree on a fresh machine (521 s of
# make test's under load here), with these it reuses vet's and the build's. A deliberate
# use of something it flags carries a //lint:ignore with the reason.
# And actionlint (a Go tool too) on .github/workflows: the CI and release
# workflows, with shellcheck on their run: scripts when it is installed
# (internal/cicheck has the project's own rules for them, run by go test).
# make vet is all three; make test runs vet-go (go vet and actionlint: they
# reuse the build's packages) and make test-all's test-race runs staticcheck
# (on a fresh machine it compiles every package's tests once more: over a
# minute of two CPUs that make test's e2e tests need; .ci/TESTTIME-NOTES.md).
.PHONY: vet-go staticcheck test-race
vet: vet-go staticcheck
vet-go: inside
	CGO_ENABLED=0 $(GO) vet -trimpath ./...
	$(GO) tool actionlint -color=false
staticcheck: inside
	CGO_ENABLED=0 GOFLAGS='$(strip $(GOFLAGS) -trimpath)' $(GO) tool staticcheck ./...

# staticcheck and every package but the e2e package under the race detector
# (make test runs them without it, with the build's flags, so that they reuse
# the build's compiled packages; the race build of the tree is a compile of
# its own). The e2e package's race build runs in test-faults.
test-race: staticcheck
	$(GO) test -race -count=1 -timeout 25m $$($(GO) list ./... | grep -v -e '/e2e$$')

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# docs/configuration.md and docs/cli.md, written from what they describe
# (internal/refdocs: the known-keys table, the PML_* variables, the
# commands' help), and docs/performance.md's quote of bench/report.md's
# Targets. The same tests, without -update, fail make test while a
# committed page differs.
.PHONY: docs
docs: inside
	$(GO) test -count=1 -run 'ReferenceIsCurrent|PerformanceQuotesTheBench' ./internal/refdocs ./cmd/pml -args -update

# Every test: unit tests and the e2e suite against the real daemon.
# .ci/test.sh makes the engine (make docker) and the images in the
# background from the start (downloads: they wait on the network, and on
# CI's background install of Debian's packages, .ci/run, not on the CPU),
# while pml and the e2e test binary compile; then it runs the e2e packages
# (every e2e test except the fault and matrix tests that make test-faults
# runs; .ci/e2e.sh holds the split and why) with vet, staticcheck and the
# unit packages beside them (.ci/TESTTIME-NOTES.md: why, and the times).
test:
	@GO=$(GO) bash .ci/test.sh $(BIN)

# The slower matrix, after make test (CI runs both, .ci/run): the MCP
# conformance suite (first: it is cheap), staticcheck and the unit packages
# under the race detector (test-race), the e2e fault and matrix tests
# make test leaves out (test-faults, a race build), fuzzing, the docs' shell examples
# (docs-check), the five
# platforms' builds (linux/arm64 run under qemu), Podman, the e2e tests as
# an ordinary user, gVisor, real MCP clients, the release and its install,
# the trace backend, Kubernetes. Each stage is a target of its own; this
# runs them in order and stops at the first that fails.
TEST_ALL_STAGES := test-conformance test-race test-faults fuzz-short docs-check test-cross test-user test-gvisor test-clients test-release test-traces test-k8s test-podman
.PHONY: test-all test-cross
test-all:
	@t0=$$(date +%s); for s in $(TEST_ALL_STAGES); do \
	  $(MAKE) --no-print-directory $$s || { echo "test-all: make $$s failed after $$(( $$(date +%s) - t0 )) s" >&2; exit 1; }; \
	  echo "test-all: make $$s passed after $$(( $$(date +%s) - t0 )) s" >&2; done
test-cross: cross

# Every Go fuzz target (func FuzzXxx in a _test.go, found by grep) for
# FUZZTIME each, FUZZJOBS targets at a time, each with FUZZPARALLEL
# workers; FUZZ picks targets by a regexp on "package-dir:FuzzName" ($ as is);
# FUZZMINIMIZETIME bounds the minimizing of each new input (Go's default
# minute ate most of a slow target's time).
# Prints each target's executions and new interesting inputs and a table;
# a crasher fails it, written under the package's testdata/fuzz/ (commit
# it with the fix: go test, so make test, replays it). New interesting
# inputs stay in Go's cache ($$(go env GOCACHE)/fuzz). .ci/fuzz.sh.
# fuzz-short is CI's pass (in TEST_ALL_STAGES): FUZZSHORTJOBS targets at a
# time, one worker each (one per core of CI's 2: each target fuzzes as long
# and as hard as alone, and the stage takes half the time, about 5 of its
# 10 minutes of fuzzing back).
FUZZTIME     ?= 10m
FUZZPARALLEL ?= 1
FUZZJOBS     ?= 1
FUZZ         ?=
FUZZMINIMIZETIME ?= 10s
FUZZSHORTJOBS ?= 2
.PHONY: fuzz fuzz-short
fuzz: inside
	@bash .ci/fuzz.sh $(FUZZTIME) $(FUZZPARALLEL) $(FUZZJOBS) '$(value FUZZ)' $(FUZZMINIMIZETIME)
fuzz-short: inside
	@bash .ci/fuzz.sh 20s $(FUZZPARALLEL) $(FUZZSHORTJOBS) '$(value FUZZ)' 5s

# The e2e tests that need no root, as a normal user (uid 1000 in the engine
# socket's group, its own HOME, workspaces it owns): .ci/test-user.sh.
# The root-owned-workspace cases run in make test (as root).
USER_TESTS ?= TestFirstRun|TestStandbyIsAdoptedByTheNextSession|TestStandbyOfAnotherSpecIsNeverAdopted|TestStandbyTwoSessionsAtOnceOneAdopts|TestReadInsideTheWorkspace|TestReadsAndWritesOutsideAreRefusedAndChangeNothing|TestAWrittenFileBelongsToTheContainerUser|TestShellReportsExitCodeAndStderr|TestPermissions|TestCallExitCodes|TestDoctorChecksTheProject|TestInitEmptyProject|TestRealGoSDKServers|TestHostilePaths|TestExecuteCallThenReturn
.PHONY: test-user
test-user: images
	$(GO) test -c -race -o bin/e2e.test ./e2e
	bash .ci/test-user.sh bin/e2e.test $(BIN) '$(USER_TESTS)'

# The e2e suite STRESS_RUNS times in a row (default 3) under -race, with a
# CPU hog beside it at the lowest priority (one busy loop per core, nice 19:
# it takes every cycle the tests leave, so waits that hold only on an idle
# machine fail here); stops at the first failing run. Not part of `make
# test` (about 8 minutes a run on 2 cores). Every e2e test but the add
# kill loop (5 to 12 minutes of npm installs, no waits to stress).
STRESS_RUNS ?= 3
.PHONY: test-stress
test-stress: images registry-bin
	@bash .ci/stress.sh $(STRESS_RUNS) env PML_BIN=$(CURDIR)/$(BIN) $(GO) test -race -count=1 -timeout 20m -skip '^TestAKilledAddChangesNothing$$' ./e2e

# The official MCP conformance suite (@modelcontextprotocol/conformance)
# and the MCP Inspector's CLI, with Node.js 22, from the npm registry into
# ~/.cache/pml/conformance (PML_CONFORMANCE_CACHE to move it; once;
# versions in e2e/conformance/install.sh), against one pml serve (every
# server scenario; failures allowed only as listed, with their reasons, in
# e2e/conformance/expected-failures.yml) and pml stdio (the Inspector's
# checks); the pml serve must live through it all. Then the suite against
# the go-sdk everything example directly and behind pml serve --server
# everything (e2e/conformance/oneserver.sh), and the suite (0.1.16 and the
# newest) against its own reference server (e2e/conformance/reference/,
# built once FROM pml/node:18) directly and behind pml serve --server
# reference (e2e/conformance/reference.sh): what passes directly must pass
# through pml. Last the newest suite (0.2.0-alpha.12, its 2026-07-28
# scenarios) against a pml serve of its own (e2e/conformance/modern.sh,
# failures allowed as listed in expected-failures-modern.yml). About a
# minute once cached.
# The e2e tests out of make test (.ci/e2e.sh's LATER, with why): the fault
# tests (a dockerd of the tests' own frozen, restarted or offline; a full
# disk; pml add killed at a dozen points, a real npm install each), the
# VM-like engine's and the client-image matrix. make test runs every other
# e2e test, so each runs in exactly one of the two.
.PHONY: test-faults
test-faults: images registry-bin
	@GO=$(GO) bash .ci/e2e.sh later $(BIN)

.PHONY: test-conformance
test-conformance: build images
	@bash e2e/conformance/install.sh
	PML_BIN=$(CURDIR)/$(BIN) bash e2e/conformance/run.sh

# Real MCP clients (Claude Code, codex, gemini-cli, opencode; versions in
# e2e/realclients/install.sh) installed from the npm registry into
# ~/.cache/pml/clients (PML_CLIENTS_CACHE to move it; once), each pointed at
# a scripted model on loopback through its own base-URL setting, set up
# by pml init: each lists pml's tools and reads a project file through
# pml (e2e/realclients). Not part of make test.
.PHONY: test-clients
test-clients: build images
	@bash e2e/realclients/install.sh
	PML_BIN=$(CURDIR)/$(BIN) $(GO) test -tags realclients -race -count=1 -timeout 30m -v ./e2e/realclients/

unit:
	$(GO) test -race -count=1 $$($(GO) list ./... | grep -v /e2e)

# make test's e2e phase alone (.ci/e2e.sh: all but the fault and matrix
# tests of make test-faults).
e2e: images registry-bin
	@GO=$(GO) bash .ci/e2e.sh first $(BIN)

# bench/report.md and bench/report.json: pml against its baselines and its
# peer (ToolHive), side by side in one run (about 5 minutes; the first run
# also installs ToolHive into ~/.cache/pml/bench, PML_BENCH_CACHE to move
# it, which can take 25 minutes on 2 busy CPUs); progress on stderr, raw
# samples in bench/tmp/ (not committed). The first-workflow row installs
# the snapshot release of this tree with install.sh, so make release runs
# first (under a minute once Go's build cache is warm, several cold).
# Then the Kubernetes rows (bench/k8s-report.md) on the test cluster, which
# it starts and takes down (bench-k8s-cluster).
bench: images
	@bash .ci/runsc.sh # the gVisor rows (docs/gvisor.md)
	$(MAKE) --no-print-directory release SNAPSHOT=1
	PML_BIN=$(CURDIR)/$(BIN) PML_BENCH_OUT=$(CURDIR)/bench PML_RELEASE_DIST=$(CURDIR)/$(DIST)/release $(GO) test -run '^$$' -bench '^BenchmarkReport$$' -benchtime 1x -count 1 -timeout 90m ./e2e
	$(MAKE) --no-print-directory bench-k8s-cluster

# Tool containers under gVisor: registers Debian's runsc with the engine
# (.ci/runsc.sh: apt, /etc/docker/daemon.json, SIGHUP, no restart), runs
# the gVisor e2e tests (build tag gvisor), then the hostile corpus and the
# egress tests with every container forced onto runsc
# (PML_SANDBOX_RUNTIME=runsc, which overrides sandbox.runtime; docs/gvisor.md).
GVISOR_FORCED := ^(TestHostile.*|TestShellExecReachesOnlyItsAllowedHost|TestAServerReachesOnlyTheHostsItIsAllowed|TestAnInstallReachesOnlyItsHosts|TestAPerCallServerGetsItsNetworkToo)$$
.PHONY: test-gvisor
test-gvisor: images registry-bin
	@bash .ci/runsc.sh
	PML_BIN=$(CURDIR)/$(BIN) $(GO) test -tags gvisor -race -count=1 -timeout 15m -run '^TestGVisor' ./e2e
	PML_SANDBOX_RUNTIME=runsc PML_BIN=$(CURDIR)/$(BIN) $(GO) test -tags gvisor -race -count=1 -timeout 30m -run '$(GVISOR_FORCED)' ./e2e
	@# Then the same engine without runsc (taken out and put back with a
	@# SIGHUP): asked for by name it is an error naming the fix; auto runs
	@# on the default runtime.
	@bash .ci/runsc.sh --unregister
	PML_BIN=$(CURDIR)/$(BIN) $(GO) test -tags gvisor -race -count=1 -timeout 10m -run '^TestNoGVisor' ./e2e; rc=$$?; bash .ci/runsc.sh; exit $$rc

# The slice e2e tests and the Podman ones (build tag podman) through
# rootless Podman, as the ordinary user pmlpodman against its own
# `podman system service` socket: installs Debian's podman and uidmap and
# creates that user on first use (e2e/podman/setup.sh; about a minute of
# tests after that). Needs root (sudo otherwise). podman-down stops the
# service.
test-podman: build images-test
	$(SUDO) env PATH="$(PATH)" GO=$(GO) PML_BIN=$(CURDIR)/$(BIN) bash e2e/podman/run.sh

podman-down:
	$(SUDO) bash e2e/podman/setup.sh down

# The Kubernetes tests (e2e/k8s, build tag k8s) against a real single-node cluster:
# e2e/k8s/cluster.sh builds Kubernetes from the Go module proxy once (cached in
# ~/.cache/pml/k8s/<version>/bin; about 15 minutes from nothing on 2 cores), starts it
# (about 25 s), loads pml's images into the node and always takes it down again.
# K8S_IMAGES: the Docker images the tests run as pods (the toolbox is tagged by the
# digest of the embedded in-container program for this machine's architecture).
K8S_CLUSTER := $(CURDIR)/e2e/k8s/cluster.sh
K8S_IMAGES ?= pml/toolbox:$$(sha256sum $(INSIDE_DIR)/pml-inside-linux-$$($(GO) env GOARCH).gz | cut -c1-16) $(shell echo pml/shell:busybox pml-test/everything:1.8.0 pml-test/memory:1.8.0 pml-test/filesystem:0.11.1)
export PML_K8S_CLUSTER := $(K8S_CLUSTER)
.PHONY: test-k8s k8s-up k8s-down
test-k8s: images
	@st=0; trap '$(K8S_CLUSTER) down; exit 130' INT TERM; \
	  { $(K8S_CLUSTER) up && $(K8S_CLUSTER) docker-check && \
	    $(K8S_CLUSTER) load $(K8S_IMAGES) && \
	    KUBECONFIG=$$($(K8S_CLUSTER) kubeconfig) PML_BIN=$(CURDIR)/$(BIN) \
	      $(GO) test -tags k8s -race -count=1 -timeout 20m ./e2e/k8s/...; } || st=$$?; \
	  $(K8S_CLUSTER) down || st=1; $(K8S_CLUSTER) docker-check || st=1; exit $$st
k8s-up:
	$(K8S_CLUSTER) up
k8s-down:
	$(K8S_CLUSTER) down

# The trace tests (e2e/traces_jaeger_test.go, build tag traces) against a real
# trace backend: Jaeger v2 built from the Go module proxy once by
# e2e/traces/build.sh (a long compile: it links the OpenTelemetry Collector),
# cached in ~/.cache/pml/bin like the registry.
JAEGER_VERSION := v1.76.0
JAEGER_BIN ?= $(HOME)/.cache/pml/bin/jaeger-$(JAEGER_VERSION)
.PHONY: jaeger-bin test-traces
jaeger-bin:
	@mkdir -p $$(dirname $(JAEGER_BIN))
	@flock $(JAEGER_BIN).lock sh -c 'if [ -x "$(JAEGER_BIN)" ]; then echo "jaeger binary: $(JAEGER_BIN) (cached)"; else \
	  echo "building Jaeger $(JAEGER_VERSION) into $(JAEGER_BIN), once" >&2; \
	  bash e2e/traces/build.sh "$(JAEGER_BIN)" $(JAEGER_VERSION); fi'
test-traces: build images jaeger-bin
	PML_JAEGER_BIN=$(JAEGER_BIN) PML_BIN=$(CURDIR)/$(BIN) $(GO) test -tags traces -race -count=1 -timeout 10m -run 'TestTraces' ./e2e

# The shell examples of README.md and docs/*.md (e2e/docs, build tag
# docscheck): every console, sh and bash block runs in a scratch workspace
# with this pml on PATH and the real engine, and must print what the page
# shows (internal/docscheck has the conventions). Not part of make test.
.PHONY: docs-check
docs-check: build images
	PML_BIN=$(CURDIR)/$(BIN) $(GO) test -tags docscheck -count=1 -timeout 30m -v ./e2e/docs/

clean:
	rm -rf bin $(DIST) $(INSIDE_DIR)/pml-inside-linux-*

# The egress figures alone (they join `make bench` as a step of its
# report): a 10 MiB download through pml's egress path vs direct, and the
# latency of one CONNECT. Needs no container.
.PHONY: bench-egress
bench-egress:
	$(GO) test -run '^$$' -bench '^BenchmarkEgress$$' -benchtime 1x -count 1 -timeout 10m ./e2e

# The Kubernetes runtime's bench rows (pool vs cold pod, pooled server vs
# native) against the test cluster (e2e/k8s/cluster.sh up): bench/k8s-report.md.
bench-k8s: build
	PML_BIN=$(CURDIR)/$(BIN) PML_BENCH_OUT=$(CURDIR)/bench $(GO) test -tags k8s -run '^$$' -bench '^BenchmarkKubernetesReport$$' -benchtime 1x -count 1 -timeout 30m ./e2e/k8s

# bench-k8s on a cluster of its own: up, images loaded, the rows, down.
.PHONY: bench-k8s bench-k8s-cluster
bench-k8s-cluster: images
	@st=0; trap '$(K8S_CLUSTER) down; exit 130' INT TERM; \
	  { $(K8S_CLUSTER) up && $(K8S_CLUSTER) load $(K8S_IMAGES) && \
	    KUBECONFIG=$$($(K8S_CLUSTER) kubeconfig) $(MAKE) --no-print-directory bench-k8s; } || st=$$?; \
	  $(K8S_CLUSTER) down || st=1; exit $$st

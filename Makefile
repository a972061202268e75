# pml — container-isolated execution broker for MCP tools.
#
#   make demo    set up everything on a fresh Debian machine and show a real session
#   make test    set up everything and run every test (unit + e2e on the real daemon)
#   make bench   benchmarks against baselines: bench/report.md and .json

SHELL   := /bin/bash
GO      ?= go
BIN     := bin/pml
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)
export PATH := /usr/local/go/bin:$(PATH)

.PHONY: all build docker images images-node images-test images-deno registry-bin demo test unit e2e vet fmt-check bench clean

all: build

# A static binary: the toolbox image is built FROM scratch from it.
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/pml

# Start a Docker engine when none answers (installs Debian's docker.io if needed).
docker:
	@bash .ci/dockerd.sh

# pml's own images, built locally without any registry, plus the Node.js
# image for npm-packaged MCP servers, the Deno runtime for code run locally
# and the test servers' images.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
images: build docker images-node images-test images-deno
	@dpkg -s busybox-static >/dev/null 2>&1 || { \
	  echo "installing Debian's busybox-static for the shell image" >&2; \
	  $(SUDO) apt-get update -qq >&2 && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq busybox-static >&2; }
	$(BIN) images build --busybox /bin/busybox

# pml/node:18: debootstrapped Debian bookworm with nodejs + npm from the npm
# registry (about 2 minutes the first time; skipped when the image exists).
images-node: docker
	@bash images/node/build.sh

# pml/deno:2.9.6: the deno binary from npm's @deno/linux-x64-glibc and its
# glibc libraries, FROM scratch, for code run locally (execute_locally);
# the npm tarball is cached in ~/.cache/pml/deno; skipped when the image exists.
images-deno: docker
	@bash images/deno/build.sh

# pml-test/{everything,memory,filesystem}: real MCP servers as FROM scratch
# images, and their static binaries in bin/testservers/ for native baselines.
images-test: docker
	@bash e2e/testservers/build.sh

# A real OCI registry (CNCF distribution) for the `pml images` e2e tests,
# built from the Go module proxy (about 3 minutes here) and cached outside
# the tree so fresh clones and .ci/run reuse it; skipped when it exists.
REGISTRY_BIN ?= $(HOME)/.cache/pml/bin/registry
REGISTRY_VERSION := v3.1.2
export PML_REGISTRY_BIN := $(REGISTRY_BIN)
registry-bin:
	@if [ -x "$(REGISTRY_BIN)" ]; then echo "registry binary: $(REGISTRY_BIN) (cached)"; else \
	  echo "building the OCI registry $(REGISTRY_VERSION) into $(REGISTRY_BIN) (about 3 minutes, once)" >&2; \
	  mkdir -p "$(dir $(REGISTRY_BIN))" && \
	  CGO_ENABLED=0 GOBIN="$(dir $(REGISTRY_BIN))" GOFLAGS= $(GO) install \
	    github.com/distribution/distribution/v3/cmd/registry@$(REGISTRY_VERSION); fi

demo: images
	$(BIN) demo

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# Every test: unit tests and the e2e suite against the real daemon.
test: images registry-bin vet fmt-check
	PML_BIN=$(CURDIR)/$(BIN) $(GO) test -race -count=1 -timeout 15m ./...

unit:
	$(GO) test -race -count=1 $$($(GO) list ./... | grep -v /e2e)

e2e: images registry-bin
	PML_BIN=$(CURDIR)/$(BIN) $(GO) test -race -count=1 -timeout 15m -v ./e2e

# bench/report.md and bench/report.json: pml against its baselines, side by
# side in one run (a few minutes); raw samples in bench/tmp/ (not committed).
bench: images
	PML_BIN=$(CURDIR)/$(BIN) PML_BENCH_OUT=$(CURDIR)/bench $(GO) test -run '^$$' -bench '^BenchmarkReport$$' -benchtime 1x -count 1 -timeout 30m ./e2e

clean:
	rm -rf bin

# The Kubernetes runtime's bench rows (pool vs cold pod, pooled server vs
# native) against the test cluster (e2e/k8s/cluster.sh up): bench/k8s-report.md.
bench-k8s: build
	PML_BIN=$(CURDIR)/$(BIN) PML_BENCH_OUT=$(CURDIR)/bench $(GO) test -tags k8s -run '^$$' -bench '^BenchmarkKubernetesReport$$' -benchtime 1x -count 1 -timeout 30m ./e2e/k8s

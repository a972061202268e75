# pml — container-isolated execution broker for MCP tools.
#
#   make demo    set up everything on a fresh Debian machine and show a real session
#   make test    set up everything and run every test (unit + e2e on the real daemon)
#   make bench   benchmarks, printed as ratios

SHELL   := /bin/bash
GO      ?= go
BIN     := bin/pml
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)
export PATH := /usr/local/go/bin:$(PATH)

.PHONY: all build docker images images-node images-test demo test unit e2e vet fmt-check bench clean

all: build

# A static binary: the toolbox image is built FROM scratch from it.
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/pml

# Start a Docker engine when none answers (installs Debian's docker.io if needed).
docker:
	@bash .ci/dockerd.sh

# pml's own images, built locally without any registry, plus the Node.js
# image for npm-packaged MCP servers and the test servers' images.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
images: build docker images-node images-test
	@dpkg -s busybox-static >/dev/null 2>&1 || { \
	  echo "installing Debian's busybox-static for the shell image" >&2; \
	  $(SUDO) apt-get update -qq >&2 && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq busybox-static >&2; }
	$(BIN) images build --busybox /bin/busybox

# pml/node:18: debootstrapped Debian bookworm with nodejs + npm from the npm
# registry (about 2 minutes the first time; skipped when the image exists).
images-node: docker
	@bash images/node/build.sh

# pml-test/{everything,memory,filesystem}: real MCP servers as FROM scratch
# images, and their static binaries in bin/testservers/ for native baselines.
images-test: docker
	@bash e2e/testservers/build.sh

demo: images
	$(BIN) demo

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# Every test: unit tests and the e2e suite against the real daemon.
test: images vet fmt-check
	PML_BIN=$(CURDIR)/$(BIN) $(GO) test -race -count=1 -timeout 15m ./...

unit:
	$(GO) test -race -count=1 $$($(GO) list ./... | grep -v /e2e)

e2e: images
	PML_BIN=$(CURDIR)/$(BIN) $(GO) test -race -count=1 -timeout 15m -v ./e2e

bench: images
	PML_BIN=$(CURDIR)/$(BIN) $(GO) test -run '^$$' -bench . -benchtime 20x -count 1 ./e2e

clean:
	rm -rf bin

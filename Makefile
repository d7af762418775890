# The two entry points are `make run` (build and start the daemon on its
# default socket) and `make test` (everything CI checks). Tools are installed
# into .cache/bin at pinned versions so they do not depend on the host.

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := build

GO ?= go
MODULE := github.com/sandboxd/sandboxd
GOBIN := $(CURDIR)/.cache/bin
export PATH := $(GOBIN):$(PATH)

# go.podman.io/storage (package layers) builds its btrfs driver with cgo,
# which needs libbtrfs headers, unless told not to; the daemon uses only its
# overlay driver. Exported, so that every go command below and those the
# tests and scripts run build alike.
GO_TAGS := containers_image_openpgp,exclude_graphdriver_btrfs
export GOFLAGS := $(strip $(GOFLAGS) -tags=$(GO_TAGS))

PROTOC_GEN_GO_VERSION := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.6.2
# The version of github.com/planetscale/vtprotobuf that go.mod requires, so
# that the generated code and its helpers match.
PROTOC_GEN_GO_VTPROTO_VERSION := v0.6.1-0.20240319094008-0393e58bdf10
STATICCHECK_VERSION := v0.8.2

PROTOS := $(wildcard proto/sandboxd/v1/*.proto)
PROTOC_FLAGS = -I proto -I /usr/include \
	--go_out=$(1) --go_opt=module=$(MODULE) \
	--go-grpc_out=$(1) --go-grpc_opt=module=$(MODULE) \
	--go-vtproto_out=$(1) --go-vtproto_opt=module=$(MODULE),features=marshal+unmarshal+size+clone

TOOLS := $(GOBIN)/.protoc-gen-go-$(PROTOC_GEN_GO_VERSION) \
	$(GOBIN)/.protoc-gen-go-grpc-$(PROTOC_GEN_GO_GRPC_VERSION) \
	$(GOBIN)/.protoc-gen-go-vtproto-$(PROTOC_GEN_GO_VTPROTO_VERSION) \
	$(GOBIN)/.staticcheck-$(STATICCHECK_VERSION)

.PHONY: build run deps proto proto-check lint cross arm64 unit conformance-rootless conformance-mechanisms test bench init-binary plan-harness

# The sandbox init is C (cmd/sandboxd-init): one runs beside every session,
# and a static C program starts in a fraction of a Go runtime's time and
# idles in a fraction of its memory. Static: a launch would otherwise pay
# for the dynamic loader.
INIT_SRC := $(wildcard cmd/sandboxd-init/*.c)
INIT_CFLAGS := -std=gnu11 -O2 -static -Wall -Wextra -Werror
# Where init-binary builds the init: tests and scripts build one of their
# own with make init-binary INIT_OUT=PATH.
INIT_OUT ?= bin/sandboxd-init
# The plan decoder's test harness (the Go fuzz and round-trip tests run
# it), with the sanitizers so that a decoder reading out of bounds fails.
HARNESS_OUT ?= bin/plandump
HARNESS_CFLAGS := -std=gnu11 -O1 -g -Wall -Wextra -Werror -fsanitize=address,undefined -fno-sanitize-recover=all

# The first build fetches modules and compiles for a minute or two: say so,
# rather than sit silent.
build: c-compiler
	@echo "make: fetching Go modules from the module proxy (once)"
	$(GO) mod download
	@echo "make: building bin/sandboxd, bin/sandboxd-init and bin/sandboxctl"
	$(GO) build -o bin/sandboxd ./cmd/sandboxd
	$(MAKE) --no-print-directory init-binary INIT_OUT=bin/sandboxd-init
	# Static: a run pays for the dynamic loader on every launch.
	CGO_ENABLED=0 $(GO) build -tags=$(GO_TAGS) -o bin/sandboxctl ./cmd/sandboxctl

# The sandbox init is C: a fresh machine gets the compiler and the static C
# library it needs here, so that make run is all the setup there is.
.PHONY: c-compiler
c-compiler:
	@if ! echo 'int main(void) { return 0; }' | $(CC) -static -x c -o /dev/null - 2>/dev/null; then \
		if [ "$$(id -u)" -ne 0 ]; then \
			echo "make: building the sandbox init needs a C compiler and a static C library (Debian: gcc libc6-dev); run as root to install them" >&2; exit 1; \
		fi; \
		echo "make: installing gcc and libc6-dev for the sandbox init"; \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends gcc libc6-dev; \
	fi

init-binary:
	@mkdir -p "$(dir $(INIT_OUT))"
	$(CC) $(INIT_CFLAGS) -o "$(INIT_OUT)" $(INIT_SRC)

plan-harness:
	@mkdir -p "$(dir $(HARNESS_OUT))"
	$(CC) $(HARNESS_CFLAGS) -o "$(HARNESS_OUT)" cmd/sandboxd-init/plan.c cmd/sandboxd-init/harness/plandump.c

# ARGS passes flags to the daemon, e.g. make run ARGS='--socket /tmp/s.sock'.
run: build
	@echo "make: starting bin/sandboxd $(ARGS); it logs its socket and its self-test"
	exec ./bin/sandboxd $(ARGS)

deps: system-packages $(TOOLS)

# Debian packages: gcc and libc6-dev to build the sandbox init statically,
# protoc and its well-known types for proto-check, bubblewrap
# for the launch-latency comparison, runc and crun to run exported OCI
# bundles, systemd for systemd-socket-activate (the socket-activation test),
# qemu-user to run the arm64 planner and seccomp tests (make arm64).
# nodejs for the event-loop state tests.
# apt is only touched when one is missing.
.PHONY: system-packages
system-packages:
	missing=(); \
	echo 'int main(void) { return 0; }' | $(CC) -static -x c -o /dev/null - 2>/dev/null || missing+=(gcc libc6-dev); \
	command -v protoc >/dev/null || missing+=(protobuf-compiler); \
	[ -f /usr/include/google/protobuf/duration.proto ] || missing+=(libprotobuf-dev); \
	command -v bwrap >/dev/null || missing+=(bubblewrap); \
	command -v systemd-socket-activate >/dev/null || missing+=(systemd); \
	command -v runc >/dev/null || missing+=(runc); \
	command -v crun >/dev/null || missing+=(crun); \
	python3 -c 'import yaml' 2>/dev/null || missing+=(python3-yaml); \
	command -v qemu-aarch64 >/dev/null || command -v qemu-aarch64-static >/dev/null || missing+=(qemu-user); \
	command -v node >/dev/null || missing+=(nodejs); \
	if [ $${#missing[@]} -gt 0 ]; then \
		if [ "$$(id -u)" -ne 0 ]; then \
			echo "make deps: missing $${missing[*]}; run as root to install them" >&2; exit 1; \
		fi; \
		apt-get update; \
		DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$${missing[@]}"; \
	fi

$(GOBIN)/.protoc-gen-go-$(PROTOC_GEN_GO_VERSION):
	GOBIN=$(GOBIN) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	touch $@

$(GOBIN)/.protoc-gen-go-grpc-$(PROTOC_GEN_GO_GRPC_VERSION):
	GOBIN=$(GOBIN) $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)
	touch $@

$(GOBIN)/.protoc-gen-go-vtproto-$(PROTOC_GEN_GO_VTPROTO_VERSION):
	GOBIN=$(GOBIN) $(GO) install github.com/planetscale/vtprotobuf/cmd/protoc-gen-go-vtproto@$(PROTOC_GEN_GO_VTPROTO_VERSION)
	touch $@

$(GOBIN)/.staticcheck-$(STATICCHECK_VERSION):
	GOBIN=$(GOBIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	touch $@

proto: deps
	protoc $(call PROTOC_FLAGS,.) $(PROTOS)

# Regenerates into a scratch directory and compares, so a .proto edited
# without `make proto` fails here instead of drifting from api/.
proto-check: deps
	tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	protoc $(call PROTOC_FLAGS,$$tmp) $(PROTOS); \
	if ! diff -ru api/sandboxd/v1 "$$tmp/api/sandboxd/v1"; then \
		echo "proto-check: api/sandboxd/v1 is stale; run make proto" >&2; exit 1; \
	fi

# staticcheck runs once per OS the backends are built for and merges the
# results: a finding on any OS is reported, and code counts as unused only
# if no OS uses it (launcher_linux's appliers are the only users of some of
# its pure helpers, which darwin and windows builds compile too).
lint: deps
	unformatted=$$(gofmt -l .); \
	if [ -n "$$unformatted" ]; then echo "gofmt -l reports:" >&2; echo "$$unformatted" >&2; exit 1; fi
	$(GO) vet ./...
	tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	for goos in linux darwin windows; do \
		cgo=$$([ $$goos = "$$($(GO) env GOHOSTOS)" ] && $(GO) env CGO_ENABLED || echo 0); \
		CGO_ENABLED=$$cgo GOOS=$$goos staticcheck -f binary ./... >"$$tmp/$$goos"; \
	done; \
	staticcheck -merge "$$tmp"/*
	scripts/check-deploy.sh

# The macOS and Windows backends must at least build and vet here, cgo off,
# as their own CI jobs are the only place they run; so must Linux on arm64,
# whose syscall tables differ from amd64's.
cross:
	for target in darwin/amd64 windows/amd64 linux/arm64; do \
		echo "GOOS/GOARCH=$$target"; \
		CGO_ENABLED=0 GOOS=$${target%/*} GOARCH=$${target#*/} $(GO) build ./...; \
		CGO_ENABLED=0 GOOS=$${target%/*} GOARCH=$${target#*/} $(GO) vet ./...; \
	done

# launcher_linux's pure tests (planner, seccomp program and tables) for
# arm64, under qemu-user.
arm64: deps
	scripts/arm64-test.sh

# -count=1: the conformance suite builds and runs the daemon's binaries,
# which the test cache does not see.
unit:
	$(GO) test -count=1 -timeout 20m ./...

conformance-rootless:
	scripts/rootless-test.sh

# The suite again on the namespace-less landlock set: forced on this host,
# and chosen by the daemon on hosts that deny user namespaces (a seccomp
# filter as root, bubblewrap --disable-userns rootless). The degraded-host
# table itself runs in unit and conformance-rootless.
conformance-mechanisms:
	SANDBOXD_CONFORMANCE_MECHANISM=landlock $(GO) test -count=1 -skip TestDegradedHosts ./internal/conformance
	SANDBOXD_CONFORMANCE_WRAP="hostsim --deny userns --" $(GO) test -count=1 -skip TestDegradedHosts ./internal/conformance
	SANDBOXD_CONFORMANCE_MECHANISM=landlock scripts/rootless-test.sh -test.skip TestDegradedHosts
	SANDBOXD_CONFORMANCE_WRAP="bwrap --unshare-user --disable-userns --die-with-parent --dev-bind / / --" scripts/rootless-test.sh -test.skip TestDegradedHosts

test: deps proto-check lint cross arm64 unit conformance-rootless conformance-mechanisms

# ARGS passes flags to internal/benchtool, e.g.
# make bench ARGS='--only latency,pty' or ARGS='--sessions 200 --hold 500'.
bench:
	$(GO) test -run '^$$' -bench . -benchtime 50x ./launcher_linux/
	$(GO) test -run '^$$' -bench . -benchtime 500x ./daemon/
	scripts/bench.sh $(ARGS)

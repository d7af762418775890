#!/usr/bin/env bash
# Runs the pure tests of launcher_linux (the planner, the seccomp program and
# its tables) and oci (the seccomp rules an exported bundle carries), built
# for arm64, under qemu-user: every test in a file without a _linux suffix,
# and the table check; and internal/hostsim's filter programs, which the
# degraded-host tests run the daemon under. The arm64 syscall tables and
# plans are so tested on an amd64 host; the tests that need a kernel of
# their own architecture run natively only (the linux-arm64 CI job).
set -euo pipefail
cd "$(dirname "$0")/.."

qemu=$(command -v qemu-aarch64 || command -v qemu-aarch64-static || true)
if [ -z "$qemu" ]; then
	echo "arm64-test: qemu-aarch64 not found; make deps installs qemu-user" >&2
	exit 1
fi

bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
for pkg in launcher_linux oci; do
	mapfile -t pure < <(ls "$pkg"/*_test.go | grep -v '_linux_test\.go$')
	tests=$(grep -h '^func Test' "${pure[@]}" | sed 's/^func \(Test[A-Za-z0-9_]*\).*/\1/' | paste -sd'|')
	GOARCH=arm64 CGO_ENABLED=0 go test -c -o "$bin/$pkg.test" "./$pkg"
	echo "arm64-test: $pkg under $qemu"
	(cd "$pkg" && "$qemu" "$bin/$pkg.test" -test.count=1 -test.v -test.run "^(${tests}|TestSyscallTablesAgree)\$" "$@")
done
GOARCH=arm64 CGO_ENABLED=0 go test -c -o "$bin/hostsim.test" ./internal/hostsim
echo "arm64-test: internal/hostsim under $qemu"
(cd internal/hostsim && "$qemu" "$bin/hostsim.test" -test.count=1 -test.v -test.run '^TestProgram' "$@")

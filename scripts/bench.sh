#!/usr/bin/env bash
# The performance figures of sandboxd, each next to its bubblewrap or raw
# counterpart measured in the same run, as ratios, with the command lines
# that reproduce them:
#   scripts/bench.sh [BENCHTOOL FLAGS]    e.g. --only latency,pty  --sessions 200 --hold 500
# It builds the binaries, starts its own sandboxd on a private socket and
# state directory, runs internal/benchtool against it (go run
# ./internal/benchtool --help lists the flags), then stops the daemon and
# removes everything it made.
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."

command -v bwrap >/dev/null || { echo "bench.sh: bwrap not found; it is the counterpart of the launch and memory figures (make deps installs it)" >&2; exit 1; }

work=$(mktemp -d)
daemon=
cleanup() {
	if [ -n "$daemon" ]; then
		# The daemon kills its sessions on the way down, so an interrupted
		# run leaves none behind even if benchtool could not.
		kill "$daemon" 2>/dev/null || true
		wait "$daemon" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT

# Every command, so that helpers the daemon looks for beside itself are there.
go build -o "$work/" ./cmd/...
# The sandbox init is C, built by make.
make -s --no-print-directory init-binary INIT_OUT="$work/sandboxd-init"
go build -o "$work/benchtool" ./internal/benchtool

# A root caller's sandboxes run as the daemon's sandbox uid, which must reach
# the workspace (mktemp -d makes $work 0700) and write it.
chmod 0755 "$work"
ws="$work/workspace"
mkdir -m 0777 "$ws"

# The open-file limit of deploy/sandboxd.service, so that the hold figure
# meets the limits a deployed daemon has rather than this shell's.
nofile=1048576
if ! ulimit -n "$nofile" 2>/dev/null; then
	echo "bench.sh: cannot raise the open-file limit to $nofile (have $(ulimit -n)); the daemon runs with that" >&2
fi

sock="$work/sandboxd.sock"
daemon_cmd=("$work/sandboxd" --socket "$sock" --state-dir "$work/state")
"${daemon_cmd[@]}" 2>"$work/sandboxd.log" &
daemon=$!
for _ in $(seq 100); do
	"$work/sandboxctl" --socket "$sock" ps >/dev/null 2>&1 && break
	sleep 0.1
done
"$work/sandboxctl" --socket "$sock" ps >/dev/null || { cat "$work/sandboxd.log" >&2; exit 1; }

echo "daemon: (ulimit -n $(ulimit -n); ${daemon_cmd[*]})   # built from $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD -- 2>/dev/null || echo ' with local changes')"
status=0
"$work/benchtool" --socket "$sock" --workspace "$ws" --sandboxctl "$work/sandboxctl" "$@" || status=$?
if [ "$status" -ne 0 ]; then
	echo "bench.sh: benchtool exited $status; the daemon's log:" >&2
	tail -n 20 "$work/sandboxd.log" >&2
fi
exit "$status"

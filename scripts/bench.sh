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
# The build tags the Makefile passes (GO_TAGS there), for this script run alone.
case " ${GOFLAGS:-} " in *" -tags="*) ;; *) export GOFLAGS="${GOFLAGS:-} -tags=containers_image_openpgp,exclude_graphdriver_btrfs" ;; esac

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

# The binaries as make build makes them (sandboxctl static: a dynamically
# linked one pays for the loader on every run), all in one directory so
# that the helpers the daemon looks for beside itself are there.
make --no-print-directory build >&2
cp bin/* "$work/"

# Every binary timed starts with its pages as a host has them after a
# reboot: read back from disk by its own runs (the figures' warm-ups), not
# as the copy above left them in the page cache. Which of the two a start
# meets matters for a 10 MB static binary: on the test host sandboxctl
# --help took 1.96 ms of CPU read back against 1.66 copied (`perf stat -r
# 200`; 379 page faults against 424, each dearer), and run 0.4 ms more.
# bwrap and true are dropped as well, so that both sides start alike
# whatever their last use left.
# The floor of the help figure: a Go program that only exits, static as
# sandboxctl is.
CGO_ENABLED=0 go build -o "$work/gofloor" ./internal/benchtool/gofloor
sync
for f in "$work/sandboxctl" "$work/gofloor" "$work/sandboxd" "$work/sandboxd-init" "$(command -v bwrap)" "$(readlink -f /bin/true)"; do
	dd if="$f" iflag=nocache count=0 status=none
done
go build -o "$work/benchtool" ./internal/benchtool

# A root caller's sandboxes run as the daemon's sandbox uid, which must reach
# the workspace (mktemp -d makes $work 0700) and write it.
chmod 0755 "$work"
ws="$work/workspace"
mkdir -m 0777 "$ws"

# The rlimits of deploy/sandboxd.service, so that the hold figure meets the
# limits a deployed daemon has rather than this shell's; benchtool --unit
# then says of each of the unit's limits whether the daemon had it and
# stayed within it.
unit=deploy/sandboxd.service
unit_limit() { sed -n "s/^$1=//p" "$unit" | tail -n 1; }
for l in NOFILE:-n NPROC:-u; do
	v=$(unit_limit "Limit${l%%:*}")
	[ -n "$v" ] || continue
	[ "$v" = infinity ] && v=unlimited
	if ! ulimit -S "${l#*:}" "$v" 2>/dev/null && ! { ulimit -H "${l#*:}" "$v" && ulimit -S "${l#*:}" "$v"; } 2>/dev/null; then
		echo "bench.sh: cannot set Limit${l%%:*}=$v of $unit (have $(ulimit "${l#*:}"), hard $(ulimit -H "${l#*:}")); the daemon runs with that" >&2
	fi
done

sock="$work/sandboxd.sock"
# One caller (this script, as one uid) starts every session, so the
# per-caller quota of live sessions (--max-sessions, 1024 by default and in
# the unit) is raised: the hold figure is of what one daemon holds within
# the host's and the unit's limits; under the unit, 10,000 sessions are ten
# callers at their quota.
daemon_cmd=("$work/sandboxd" --socket "$sock" --state-dir "$work/state" --max-sessions 1000000)
"${daemon_cmd[@]}" 2>"$work/sandboxd.log" &
daemon=$!
for _ in $(seq 100); do
	"$work/sandboxctl" --socket "$sock" ps >/dev/null 2>&1 && break
	sleep 0.1
done
"$work/sandboxctl" --socket "$sock" ps >/dev/null || { cat "$work/sandboxd.log" >&2; exit 1; }

echo "daemon: (ulimit -n $(ulimit -n); ${daemon_cmd[*]})   # built from $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD -- 2>/dev/null || echo ' with local changes')"
status=0
"$work/benchtool" --socket "$sock" --workspace "$ws" --sandboxctl "$work/sandboxctl" --go-floor "$work/gofloor" --unit "$unit" "$@" || status=$?
if [ "$status" -ne 0 ]; then
	echo "bench.sh: benchtool exited $status; the daemon's log:" >&2
	tail -n 20 "$work/sandboxd.log" >&2
fi
exit "$status"

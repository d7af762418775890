#!/usr/bin/env bash
# Launch latency of `sandboxctl run -- /bin/true` next to bubblewrap's
# nearest equivalent, measured in one run on the same machine:
#   scripts/bench-launch.sh [RUNS]      (default 50 runs each)
# It builds the binaries, starts its own sandboxd on a private socket, warms
# both up, then prints the mean wall time per launch and the ratio.
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."

runs=${1:-50}
command -v bwrap >/dev/null || { echo "bench-launch.sh: bwrap not found (make deps installs it)" >&2; exit 1; }

work=$(mktemp -d)
daemon=
cleanup() {
	if [ -n "$daemon" ]; then
		kill "$daemon" 2>/dev/null || true
		wait "$daemon" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT

go build -o "$work/sandboxd" ./cmd/sandboxd
go build -o "$work/sandboxctl" ./cmd/sandboxctl
sock="$work/sandboxd.sock"
"$work/sandboxd" --socket "$sock" --state-dir "$work/state" 2>"$work/sandboxd.log" &
daemon=$!
for _ in $(seq 100); do
	"$work/sandboxctl" --socket "$sock" ps >/dev/null 2>&1 && break
	sleep 0.1
done
"$work/sandboxctl" --socket "$sock" ps >/dev/null || { cat "$work/sandboxd.log" >&2; exit 1; }

sandboxctl_true() { "$work/sandboxctl" --socket "$sock" run -- /bin/true; }
bwrap_true() { bwrap --ro-bind / / --dev /dev --proc /proc --unshare-all --die-with-parent --new-session true; }

# mean_ms FUNC: mean wall-clock milliseconds of one FUNC call over $runs.
mean_ms() {
	local i start end
	for i in 1 2 3; do "$1"; done
	start=$(date +%s%N)
	for ((i = 0; i < runs; i++)); do "$1"; done
	end=$(date +%s%N)
	awk -v ns=$((end - start)) -v n="$runs" 'BEGIN { printf "%.2f", ns / n / 1e6 }'
}

sd=$(mean_ms sandboxctl_true)
bw=$(mean_ms bwrap_true)
printf '%-56s %8s\n' "launch of /bin/true ($runs runs each)" "mean ms"
printf '%-56s %8s\n' "sandboxctl run -- /bin/true" "$sd"
printf '%-56s %8s\n' "bwrap --ro-bind / / ... --unshare-all ... true" "$bw"
awk -v a="$sd" -v b="$bw" 'BEGIN { printf "ratio sandboxctl/bwrap: %.2fx\n", a / b }'

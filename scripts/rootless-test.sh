#!/usr/bin/env bash
# Runs the conformance suite with sandboxd as an unprivileged user: the same
# cases, with the daemon building its sandboxes from unprivileged user
# namespaces instead of root's. Run as root; it creates the user if missing
# (SANDBOXD_TEST_USER, default sandboxd-test), builds everything as root,
# and runs the compiled suite as that user. Extra arguments go to the test
# binary, e.g. scripts/rootless-test.sh -test.run 'Conformance/exec/'.
set -euo pipefail
cd "$(dirname "$0")/.."
# The build tags the Makefile passes (GO_TAGS there), for this script run alone.
case " ${GOFLAGS:-} " in *" -tags="*) ;; *) export GOFLAGS="${GOFLAGS:-} -tags=containers_image_openpgp,exclude_graphdriver_btrfs" ;; esac

user=${SANDBOXD_TEST_USER:-sandboxd-test}
if [ "$(id -u)" -ne 0 ]; then
	echo "rootless-test.sh: must run as root: it creates the user $user and runs the suite as that user" >&2
	exit 1
fi
if ! id -u "$user" >/dev/null 2>&1; then
	useradd -m -s /bin/bash "$user"
fi
home=$(getent passwd "$user" | cut -d: -f6)

# Everything the user needs lives under one directory it can read but not
# change; only its runtime and temp directories are its own.
# Under /var/tmp, not /tmp: sandboxes get a private /tmp, and the suite runs
# sandboxctl from here, whose working directory becomes the command's.
work=$(mktemp -d /var/tmp/sandboxd-rootless.XXXXXX)
trap 'rm -rf "$work"' EXIT
chmod 0755 "$work"
mkdir -p "$work/bin"
CGO_ENABLED=0 go build -o "$work/bin/sandboxd" ./cmd/sandboxd
make -s --no-print-directory init-binary INIT_OUT="$work/bin/sandboxd-init"
CGO_ENABLED=0 go build -o "$work/bin/sandboxctl" ./cmd/sandboxctl
CGO_ENABLED=0 go build -o "$work/bin/probe" ./internal/conformance/probe
CGO_ENABLED=0 go build -o "$work/bin/hostsim" ./internal/hostsim/cmd/hostsim
go test -c -o "$work/conformance.test" ./internal/conformance
# The quickstart test reads the README, which the test user may not reach
# where the repository is.
cp README.md "$work/README.md"
install -d -m 0700 -o "$user" -g "$(id -gn "$user")" "$work/runtime" "$work/tmp"
# A write root of the user's holding a root-owned file and a root-only
# directory: the suite cannot make them without root, and the cases using
# them must not be skipped.
install -d -m 0755 -o "$user" -g "$(id -gn "$user")" "$work/root-owned"
printf 'root\n' > "$work/root-owned/root-owned"
chmod 0644 "$work/root-owned/root-owned"
install -d -m 0700 "$work/root-owned/private"
printf 'secret\n' > "$work/root-owned/private/secret"

# Limits need cgroups the daemon may write: delegate a cgroup to the user,
# as systemd's Delegate=yes would, and run the suite inside it. On v1 that
# is a directory per controller owned by the user; on v2 one with the
# controllers enabled, the suite in a leaf of it (a v2 cgroup with
# processes hands no controllers down).
delegated=()
undelegate() {
	for d in "${delegated[@]}"; do
		echo $$ > "$(dirname "$d")/cgroup.procs" 2>/dev/null || echo $$ > "$(dirname "$(dirname "$d")")/cgroup.procs" 2>/dev/null || true
		find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null || true
	done
}
trap 'undelegate; rm -rf "$work"' EXIT
name="sandboxd-rootless.$$"
ugrp="$(id -gn "$user")"
while read -r mnt fstype opts; do
	case "$fstype" in
	cgroup)
		case ",$opts," in *,memory,*|*,pids,*|*,cpu,*) ;; *) continue ;; esac
		d="$mnt/$name"
		mkdir "$d"
		chown -R "$user:$ugrp" "$d"
		echo $$ > "$d/cgroup.procs"
		delegated+=("$d")
		;;
	cgroup2)
		grep -qw memory "$mnt/cgroup.controllers" || continue
		d="$mnt/$name"
		mkdir "$d"
		echo "+memory +pids +cpu" > "$mnt/cgroup.subtree_control"
		echo "+memory +pids +cpu" > "$d/cgroup.subtree_control"
		mkdir "$d/suite"
		chown "$user:$ugrp" "$d" "$d/cgroup.procs" "$d/cgroup.subtree_control" "$d/cgroup.threads"
		chown -R "$user:$ugrp" "$d/suite"
		echo $$ > "$d/suite/cgroup.procs"
		delegated+=("$d")
		;;
	esac
done < <(awk '{ for (i = 7; $i != "-"; i++); print $5, $(i+1), $(i+3) }' /proc/self/mountinfo)

cd "$work"
echo "rootless-test.sh: running the conformance suite as $user (uid $(id -u "$user")) in delegated cgroups: ${delegated[*]:-none}"
runuser -u "$user" -- env -i \
	PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
	HOME="$home" USER="$user" LANG=C.UTF-8 \
	XDG_RUNTIME_DIR="$work/runtime" TMPDIR="$work/tmp" \
	SANDBOXD_CONFORMANCE_BIN="$work/bin" \
	SANDBOXD_CONFORMANCE_ROOT_OWNED_DIR="$work/root-owned" \
	SANDBOXD_CONFORMANCE_README="$work/README.md" \
	SANDBOXD_CONFORMANCE_MECHANISM="${SANDBOXD_CONFORMANCE_MECHANISM:-}" \
	SANDBOXD_CONFORMANCE_WRAP="${SANDBOXD_CONFORMANCE_WRAP:-}" \
	./conformance.test -test.v -test.count=1 -test.timeout=20m "$@"

package conformance

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/moby/sys/mountinfo"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/internal/initbuild"
	launcherlinux "github.com/sandboxd/sandboxd/launcher_linux"
)

// linuxHost is what the suite knows of a Linux host beyond what every OS
// has.
var linuxHost struct {
	// hostsim is the built degraded-host simulator.
	hostsim string
	// namespaces says the namespaces set can enforce every case here;
	// when it cannot, a case's policy may be refused, never run weaker.
	namespaces bool
}

// trueCmd exits 0 and does nothing else.
const trueCmd = "/bin/true"

// hostBinaries names the degraded-host simulator in dir, with its package.
func hostBinaries(dir string) map[string]string {
	linuxHost.hostsim = filepath.Join(dir, "hostsim")
	return map[string]string{
		linuxHost.hostsim: "github.com/sandboxd/sandboxd/internal/hostsim/cmd/hostsim",
	}
}

// buildNative builds the sandbox init, a C program, beside sandboxd in
// dir, where the daemon looks for it.
func buildNative(dir string) error {
	return initbuild.Init(filepath.Join(dir, "sandboxd-init"))
}

// hostOptions lets SANDBOXD_CONFORMANCE_WRAP name the built simulator as
// "hostsim".
func hostOptions() error {
	if len(suite.wrap) > 0 && suite.wrap[0] == "hostsim" {
		suite.wrap[0] = linuxHost.hostsim
	}
	return nil
}

func hostCapabilities() {
	linuxHost.namespaces = suite.mechanism != "landlock" && namespacesComplete(suite.caps)
	fmt.Fprintf(os.Stderr, "conformance: daemon mechanism set %q (empty: its choice), wrapped in %q; namespaces set complete here: %v\n",
		suite.mechanism, suite.wrap, linuxHost.namespaces)
}

// namespacesComplete: every probe the namespaces set rests on worked.
func namespacesComplete(r *sandboxdv1.CapabilitiesReport) bool {
	need := []string{launcherlinux.PrimUserNS, launcherlinux.PrimIDMap, launcherlinux.PrimMountNS, launcherlinux.PrimPIDNS, launcherlinux.PrimIPCNS,
		launcherlinux.PrimUTSNS, launcherlinux.PrimCgroupNS, launcherlinux.PrimNetNS, launcherlinux.PrimLoopback, launcherlinux.PrimMounts, launcherlinux.PrimSeccomp}
	for _, p := range r.GetProbes() {
		if slices.Contains(need, p.GetName()) && !p.GetOk() {
			return false
		}
	}
	return len(r.GetProbes()) > 0
}

// daemonProcAttr: a test binary that dies must not leave daemons behind.
func daemonProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// checkMechanismSet fails the test when a session ran on another set than
// the one the daemon was forced to, or than namespaces where they work.
func checkMechanismSet(t *testing.T, set string) {
	t.Helper()
	if suite.mechanism != "" && set != suite.mechanism {
		t.Fatalf("session ran on mechanism set %q, the daemon was forced to %q", set, suite.mechanism)
	}
	if linuxHost.namespaces && suite.mechanism == "" && set != "namespaces" {
		t.Fatalf("session ran on mechanism set %q on a host where namespaces work", set)
	}
}

// refusalsAllowed says whether this host may refuse a policy the suite
// runs: only one where the namespaces set is incomplete.
func refusalsAllowed() bool {
	return !linuxHost.namespaces
}

// sameTarget compares denial targets: Linux reports the path the process
// named.
func sameTarget(got, want string) bool {
	return got == want
}

// processesWith lists host pids whose command line contains marker, so the
// suite can find sandboxed processes from outside their pid namespace.
func processesWith(marker string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte(marker)) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// hostUIDs is the Uid line of /proc/PID/status: real, effective, saved and
// file-system uid as the host sees them.
func hostUIDs(pid int) ([]int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			var ids []int
			for _, f := range strings.Fields(rest) {
				id, err := strconv.Atoi(f)
				if err != nil {
					return nil, err
				}
				ids = append(ids, id)
			}
			return ids, nil
		}
	}
	return nil, fmt.Errorf("no Uid line in /proc/%d/status", pid)
}

// mountsBeneath are the mount points strictly beneath dir in the suite's
// mount namespace, the host's, in the order of its mount table.
func mountsBeneath(dir string) ([]string, error) {
	mounts, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
	if err != nil {
		return nil, fmt.Errorf("mounts beneath %s: %w", dir, err)
	}
	var out []string
	for _, m := range mounts {
		if m.Mountpoint != dir {
			out = append(out, m.Mountpoint)
		}
	}
	return out, nil
}

// unmountBeneath unmounts what is mounted beneath dir, last mounted first,
// and says what it was: a test that failed must not leave mounts in the
// host's mount table, nor the removal of its directory reach into them.
func unmountBeneath(dir string) ([]string, error) {
	mounts, err := mountsBeneath(dir)
	for _, m := range slices.Backward(mounts) {
		if uerr := syscall.Unmount(m, syscall.MNT_DETACH); uerr != nil {
			err = errors.Join(err, fmt.Errorf("unmount %s: %w", m, uerr))
		}
	}
	return mounts, err
}

// noMountsBeneath fails t for each mount beneath dir.
func noMountsBeneath(t *testing.T, dir, when string) {
	t.Helper()
	mounts, err := mountsBeneath(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mounts {
		t.Errorf("%s mounted %s: %s", m, when, mountLine(m))
	}
}

// mountLine is the mount table's line of mount point m, to tell whose it
// is.
func mountLine(m string) string {
	mounts, _ := mountinfo.GetMounts(mountinfo.SingleEntryFilter(m))
	if len(mounts) == 0 {
		return "gone"
	}
	return mounts[0].FSType + " " + mounts[0].Source + " " + mounts[0].VFSOptions
}

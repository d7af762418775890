package conformance

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// seatbeltSet is the darwin backend's one mechanism set.
const seatbeltSet = "seatbelt"

// trueCmd exits 0 and does nothing else; macOS has it only in /usr/bin.
const trueCmd = "/usr/bin/true"

// hostBinaries: macOS needs nothing beyond the daemon, the CLI and the
// probe; the degraded-host simulator is Linux's.
func hostBinaries(string) map[string]string {
	return nil
}

// buildNative: every binary here is Go.
func buildNative(string) error { return nil }

// hostOptions refuses a forced mechanism set: there is only one here.
func hostOptions() error {
	if suite.mechanism != "" {
		return fmt.Errorf("SANDBOXD_CONFORMANCE_MECHANISM=%q: the darwin backend has one mechanism set, %s, and no other to force; unset it",
			suite.mechanism, seatbeltSet)
	}
	return nil
}

func hostCapabilities() {
	fmt.Fprintf(os.Stderr, "conformance: backend %q, wrapped in %q\n", suite.caps.GetBackend(), suite.wrap)
}

// daemonProcAttr: macOS has no parent-death signal; tearDown and each
// test's cleanup stop the daemons they start.
func daemonProcAttr() *syscall.SysProcAttr {
	return nil
}

func checkMechanismSet(t *testing.T, set string) {
	t.Helper()
	if set != seatbeltSet {
		t.Fatalf("session ran on mechanism set %q, want %s", set, seatbeltSet)
	}
}

// refusalsAllowed: Seatbelt is on every Mac and the seatbelt set has no
// optional parts, so a policy the suite runs is never refused here.
func refusalsAllowed() bool {
	return false
}

// sameTarget compares denial targets as host paths: macOS reports the path
// with its links resolved (/private/etc/x for /etc/x).
func sameTarget(got, want string) bool {
	return resolved(got) == resolved(want)
}

// resolved is path with the links among its existing ancestors resolved; a
// target that is not a path (an address) comes back as it is.
func resolved(path string) string {
	if r, err := filepath.EvalSymlinks(path); err == nil {
		return r
	}
	dir, base := filepath.Split(path)
	if dir == "" || dir == path {
		return path
	}
	return filepath.Join(resolved(filepath.Clean(dir)), base)
}

// psProcess is one line of ps.
type psProcess struct {
	pid int
	// uids are the effective, real and saved uid.
	uids []int
	args string
}

// psLine is pid, uid, ruid, svuid, then the command line with its spaces.
var psLine = regexp.MustCompile(`^\s*(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s?(.*)$`)

// ps lists processes (all of them, or those sel selects) with their uids
// and full command lines. It panics when ps fails: a suite that cannot see
// processes would pass every check that one is gone.
func ps(sel ...string) []psProcess {
	cmd := exec.Command("ps", append(sel, "-ww", "-o", "pid=,uid=,ruid=,svuid=,args=")...)
	out, err := cmd.Output()
	// ps exits 1 when it selected nothing.
	if ee, ok := err.(*exec.ExitError); err != nil && !(ok && ee.ExitCode() == 1 && len(out) == 0) {
		panic(fmt.Sprintf("%s: %v", strings.Join(cmd.Args, " "), err))
	}
	var list []psProcess
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		if line == "" {
			continue
		}
		m := psLine.FindStringSubmatch(line)
		if m == nil {
			panic(fmt.Sprintf("%s: unexpected line %q", strings.Join(cmd.Args, " "), line))
		}
		p := psProcess{args: m[5]}
		p.pid, _ = strconv.Atoi(m[1])
		for _, s := range m[2:5] {
			id, _ := strconv.Atoi(s)
			p.uids = append(p.uids, id)
		}
		list = append(list, p)
	}
	return list
}

// processesWith lists host pids whose command line contains marker.
func processesWith(marker string) []int {
	var pids []int
	self := os.Getpid()
	for _, p := range ps("-ax") {
		if p.pid != self && strings.Contains(p.args, marker) {
			pids = append(pids, p.pid)
		}
	}
	return pids
}

// hostUIDs is the effective, real and saved uid of pid as the host sees
// them.
func hostUIDs(pid int) ([]int, error) {
	list := ps("-p", strconv.Itoa(pid))
	if len(list) != 1 {
		return nil, fmt.Errorf("no process %d", pid)
	}
	return list[0].uids, nil
}

// unmountBeneath has nothing to do on macOS: the darwin backend confines
// with Seatbelt profiles and the daemon mounts nothing.
func unmountBeneath(string) ([]string, error) { return nil, nil }

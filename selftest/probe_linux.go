package selftest

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// dialTimeout bounds each connect: a denied one fails at once, and one that
// hangs must not stall the self-test.
const dialTimeout = 3 * time.Second

// RunProbeIfRequested turns this process into the self-test probe when it
// was started as one (argv[0]'s base name is ProbeName): it runs the steps
// named by its arguments, prints one JSON line per step and exits 0. It
// returns at once otherwise.
func RunProbeIfRequested() {
	if filepath.Base(os.Args[0]) != ProbeName {
		return
	}
	probe(os.Args[1:], os.Stdout)
	os.Exit(0)
}

// probe runs each "step=argument" and reports whether the attempt
// succeeded; judging that is the self-test's job, so the probe stays the
// same whatever the policy.
func probe(args []string, w io.Writer) {
	enc := json.NewEncoder(w)
	for _, a := range args {
		name, arg, _ := strings.Cut(a, "=")
		err := attempt(name, arg)
		res := probeResult{Step: name, OK: err == nil}
		if err != nil {
			res.Err = err.Error()
		}
		enc.Encode(res)
	}
}

func attempt(step, arg string) error {
	switch step {
	case StepWriteRoot, StepWriteOutside:
		return os.WriteFile(arg, []byte("written by the sandboxd self-test probe\n"), 0o644)
	case StepChmodOutside:
		return os.Chmod(arg, 0o777)
	case StepReadDeny:
		_, err := os.ReadFile(arg)
		return err
	case StepTCPLoopback:
		return dial("tcp", arg)
	case StepUnixSocket:
		return dial("unix", arg)
	case StepSignalDaemon:
		return signalDaemon(arg)
	case StepNonRoot:
		if uid, euid := os.Getuid(), os.Geteuid(); uid == 0 || euid == 0 {
			return fmt.Errorf("running as uid %d euid %d", uid, euid)
		}
		return nil
	}
	return fmt.Errorf("unknown step %q", step)
}

func dial(network, addr string) error {
	c, err := net.DialTimeout(network, addr, dialTimeout)
	if err != nil {
		return err
	}
	return c.Close()
}

// signalDaemon tries kill(pid, 0) on "pid:starttime". Inside a pid
// namespace the daemon's pid number may name one of the sandbox's own
// processes; reaching that is not reaching the daemon, so success counts
// only when the start time matches too.
func signalDaemon(arg string) error {
	pidText, startText, ok := strings.Cut(arg, ":")
	pid, err := strconv.Atoi(pidText)
	if !ok || err != nil || pid <= 0 {
		return fmt.Errorf("bad daemon %q", arg)
	}
	want, err := strconv.ParseUint(startText, 10, 64)
	if err != nil {
		return fmt.Errorf("bad daemon %q", arg)
	}
	if err := syscall.Kill(pid, 0); err != nil {
		return fmt.Errorf("kill(%d, 0): %w", pid, err)
	}
	got, err := startTime(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		// Unverifiable counts as reached: a denial must be shown, not
		// assumed.
		return nil
	}
	if got != want {
		return fmt.Errorf("pid %d is another process in the sandbox's pid namespace, not the daemon", pid)
	}
	return nil
}

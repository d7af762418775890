package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The kernel names a process after the file it executes, so a daemon run
// again from /proc/self/exe would be "exe" to ps, pgrep, top and the OOM
// killer's log. Package initialisers run on the main thread, whose name is
// the process's; the name is argv[0]'s, as the first exec gave it.
func init() {
	name := []byte(filepath.Base(os.Args[0]))
	if len(name) > 15 {
		name = name[:15]
	}
	name = append(name, 0)
	unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(&name[0])), 0, 0, 0)
}

// sysmonAwake is the GODEBUG setting under which the daemon runs. The Go
// runtime's monitor thread (sysmon) sleeps deeply while every processor is
// idle, and the first system call after that wakes it and sets it polling
// every 20 us for at least a millisecond. A daemon that launches hundreds
// of sandboxes a second goes idle and wakes up between the steps of each
// launch, so its monitor polled nearly all the time: a fifth of the
// daemon's CPU per launch went to that thread's sleeps and wake-ups. With
// schedtrace set the monitor never sleeps deeply: it backs off to polling
// every 10 ms whenever it has found nothing to do. The interval is the
// largest the runtime takes (24.8 days), so the scheduler summary it
// prints at that interval (and once at start on a host up for longer)
// stays a rare line in the daemon's log.
const sysmonAwake = "schedtrace=2147483647"

// keepSysmonAwake executes the daemon again with sysmonAwake added to
// GODEBUG, which the runtime reads only as it starts; the process keeps
// its pid, its open files (a socket systemd passed) and the rest of its
// environment. An operator's own schedtrace is left as it is, and a
// daemon that cannot be executed again runs on as it is, saying why once
// its log is open (sysmonAwakeErr).
func keepSysmonAwake() {
	env, ok := sysmonAwakeEnv(os.Environ())
	if !ok {
		return
	}
	// The binary the process runs, which its path may no longer name: an
	// upgrade may have removed it, or renamed another over it.
	const exe = "/proc/self/exe"
	err := syscall.Exec(exe, os.Args, env)
	sysmonAwakeErr = fmt.Errorf("run the daemon again from %s with GODEBUG=%s: %w", exe, sysmonAwake, err)
}

// sysmonAwakeEnv is env, os.Environ's (no name twice), with sysmonAwake
// added to its GODEBUG, and false when its GODEBUG sets schedtrace
// already: the operator's, or this one once the daemon runs again with
// it.
func sysmonAwakeEnv(env []string) ([]string, bool) {
	godebug := ""
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "GODEBUG="); ok {
			godebug = v
			continue
		}
		out = append(out, kv)
	}
	for _, s := range strings.Split(godebug, ",") {
		if strings.HasPrefix(s, "schedtrace=") {
			return nil, false
		}
	}
	if godebug != "" {
		godebug += ","
	}
	return append(out, "GODEBUG="+godebug+sysmonAwake), true
}

package main

import (
	"fmt"
	"strconv"

	"golang.org/x/sys/unix"
)

func platformOps() map[string]op {
	m := map[string]op{
		"kill":         {2, kill},
		"uid":          {0, uid},
		"no-extra-fds": {0, noExtraFds},
		"procargs":     {1, procargs},
	}
	for name, o := range unixOps() {
		m[name] = o
	}
	return m
}

// procargs reads another process's arguments and environment the way ps
// does, through kern.procargs2: macOS has no /proc, and this is where a
// host process's secrets (tokens in its environment) would leak from. It is
// ok when the kernel returned any of them.
func procargs(args []string) Result {
	pid, err := strconv.Atoi(args[0])
	if err != nil {
		return outcome(err, nil)
	}
	b, err := unix.SysctlRaw("kern.procargs2", pid)
	if err != nil {
		return outcome(err, nil)
	}
	if len(b) == 0 {
		return Result{Detail: "no data"}
	}
	return outcome(nil, fmt.Sprintf("%d bytes", len(b)))
}

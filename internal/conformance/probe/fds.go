//go:build linux || darwin

package main

import (
	"os"
	"strconv"
)

// noExtraFds succeeds when the probe holds no fd beyond 0, 1 and 2 but the
// one it lists them with and its Go runtime's own: anything else was
// inherited from the sandbox's setup. Run it as the first operation, before
// the probe opens files.
func noExtraFds([]string) Result {
	dir, err := os.Open(fdDir)
	if err != nil {
		return outcome(err, nil)
	}
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return outcome(err, nil)
	}
	var extra []string
	for _, n := range names {
		fd, err := strconv.Atoi(n)
		if err != nil || fd <= 2 || uintptr(fd) == dir.Fd() {
			continue
		}
		what, own := describeFd(fd)
		if own {
			continue
		}
		extra = append(extra, n+" -> "+what)
	}
	if len(extra) > 0 {
		return Result{Errno: "EEXIST", Detail: extra}
	}
	return outcome(nil, nil)
}

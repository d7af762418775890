package main

import (
	"os"
	"strconv"
	"strings"
)

const fdDir = "/proc/self/fd"

// describeFd is what fd points to and whether it is one the probe's Go
// runtime opens for itself: its netpoller and the cgroup files it reads its
// CPU limit from.
func describeFd(fd int) (what string, own bool) {
	target, _ := os.Readlink(fdDir + "/" + strconv.Itoa(fd))
	return target, target == "anon_inode:[eventpoll]" || target == "anon_inode:[eventfd]" ||
		strings.HasPrefix(target, "/sys/fs/cgroup/")
}

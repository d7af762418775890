// Package fdwaittest tells tests which epoll instances of the process
// hold a descriptor: whether it waits in the runtime's poller, the shared
// waiter's, both or neither.
package fdwaittest

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// EpollsHolding counts the process's epoll instances that fd is in.
func EpollsHolding(t testing.TB, fd int) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err != nil || target != "anon_inode:[eventpoll]" {
			continue
		}
		info, err := os.ReadFile("/proc/self/fdinfo/" + e.Name())
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(info), "\n") {
			if f := strings.Fields(line); len(f) > 1 && f[0] == "tfd:" && f[1] == strconv.Itoa(fd) {
				n++
			}
		}
	}
	return n
}

// FD is c's descriptor.
func FD(t testing.TB, c syscall.Conn) int {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	fd := -1
	if err := rc.Control(func(u uintptr) { fd = int(u) }); err != nil {
		t.Fatal(err)
	}
	return fd
}

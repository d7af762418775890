package main

import (
	"fmt"
	"os"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

func platformOps() map[string]op {
	m := map[string]op{
		"kill":         {2, kill},
		"uid":          {0, uid},
		"tiocsti":      {0, tiocsti},
		"no-extra-fds": {0, noExtraFds},
		"syscall":      {1, rawSyscall},
	}
	for name, o := range unixOps() {
		m[name] = o
	}
	for name, o := range linuxMetaOps() {
		m[name] = o
	}
	return m
}

// tiocsti tries to push a character into the input queue of the terminal on
// fd 0 and of the controlling terminal, each with the plain request and with
// bits set above 32: the kernel truncates the request to 32 bits, so a
// seccomp filter that compares all 64 misses that variant. It is ok when any
// attempt injected the character.
func tiocsti([]string) Result {
	type target struct {
		name string
		fd   uintptr
	}
	targets := []target{{"fd0", 0}}
	if tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0); err == nil {
		defer tty.Close()
		targets = append(targets, target{"/dev/tty", tty.Fd()})
	} else {
		targets = append(targets, target{"/dev/tty", ^uintptr(0)})
	}
	c := byte(' ')
	var attempts []string
	injected := false
	for _, t := range targets {
		for _, req := range []struct {
			name string
			cmd  uint64
		}{
			{"TIOCSTI", unix.TIOCSTI},
			{"TIOCSTI|1<<32", unix.TIOCSTI | 1<<32},
		} {
			var res string
			if t.fd == ^uintptr(0) {
				res = "cannot open"
			} else {
				_, _, errno := unix.Syscall(unix.SYS_IOCTL, t.fd, uintptr(req.cmd), uintptr(unsafe.Pointer(&c)))
				if errno == 0 {
					injected = true
					res = "injected"
				} else {
					res = unix.ErrnoName(errno)
				}
			}
			attempts = append(attempts, fmt.Sprintf("%s %s: %s", t.name, req.name, res))
		}
	}
	return Result{OK: injected, Detail: strings.Join(attempts, "; ")}
}

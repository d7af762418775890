package main

import (
	"fmt"
	"os"
	"strconv"
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
		// The session keyring the probe has, and a key it reaches
		// through it or by its id.
		"session-keyring": {0, sessionKeyring},
		"key-search":      {1, keySearch},
		"key-read":        {1, keyRead},
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

// sessionKeyring is the id of the probe's session keyring; none is made
// for it where it has none.
func sessionKeyring([]string) Result {
	id, err := unix.KeyctlGetKeyringID(unix.KEY_SPEC_SESSION_KEYRING, false)
	if err != nil {
		return outcome(err, nil)
	}
	return outcome(nil, strconv.Itoa(id))
}

// keySearch looks for a user key by its description in the probe's
// session keyring and the keyrings linked from it.
func keySearch(args []string) Result {
	id, err := unix.KeyctlSearch(unix.KEY_SPEC_SESSION_KEYRING, "user", args[0], 0)
	if err != nil {
		return outcome(err, nil)
	}
	return outcome(nil, strconv.Itoa(id))
}

// keyRead reads the payload of the key with the id args[0].
func keyRead(args []string) Result {
	id, err := strconv.Atoi(args[0])
	if err != nil {
		return Result{Errno: "EINVAL", Detail: err.Error()}
	}
	buf := make([]byte, 256)
	n, err := unix.KeyctlBuffer(unix.KEYCTL_READ, id, buf, 0)
	if err != nil {
		return outcome(err, nil)
	}
	return outcome(nil, string(buf[:min(n, len(buf))]))
}

//go:build unix

package main

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// probeTime is what utimes sets: a time no fixture has by accident.
var probeTime = time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)

// metaOps change or read an inode's metadata by name, without opening it:
// mode, owner, times, and what stat, access and readlink tell.
func metaOps() map[string]op {
	return map[string]op{
		"chmod":    {2, chmod},
		"chown":    {1, chown},
		"utimes":   {1, utimes},
		"stat":     {1, stat},
		"access":   {1, access},
		"readlink": {1, readlink},
		// Make a file or directory with a mode, as given (octal).
		"create-mode": {2, createMode},
		"mkdir-mode":  {2, mkdirMode},
	}
}

func chmod(args []string) Result {
	mode, err := strconv.ParseUint(args[1], 8, 32)
	if err != nil {
		return outcome(err, nil)
	}
	return outcome(unix.Chmod(args[0], uint32(mode)), nil)
}

// chown gives the file to the probe's own ids, which its owner may do:
// whether it may at all is the policy's question.
func chown(args []string) Result {
	return outcome(unix.Chown(args[0], os.Getuid(), os.Getgid()), nil)
}

func utimes(args []string) Result {
	return outcome(os.Chtimes(args[0], probeTime, probeTime), nil)
}

// stat reports what lstat says, as "mode=... size=... mtime=...", for
// the suite to compare with the host's.
func stat(args []string) Result {
	var st unix.Stat_t
	if err := unix.Lstat(args[0], &st); err != nil {
		return outcome(err, nil)
	}
	return outcome(nil, statDetail(uint32(st.Mode), st.Size, st.Mtim.Sec))
}

func statDetail(mode uint32, size, mtime int64) string {
	return fmt.Sprintf("mode=%o size=%d mtime=%d", mode, size, mtime)
}

func access(args []string) Result {
	return outcome(unix.Access(args[0], unix.F_OK), nil)
}

func readlink(args []string) Result {
	target, err := os.Readlink(args[0])
	return outcome(err, target)
}

func parseMode(s string) (uint32, error) {
	m, err := strconv.ParseUint(s, 8, 32)
	return uint32(m), err
}

func createMode(args []string) Result {
	mode, err := parseMode(args[1])
	if err != nil {
		return outcome(err, nil)
	}
	fd, err := unix.Open(args[0], unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, mode)
	if err == nil {
		unix.Close(fd)
	}
	return outcome(err, nil)
}

func mkdirMode(args []string) Result {
	mode, err := parseMode(args[1])
	if err != nil {
		return outcome(err, nil)
	}
	return outcome(unix.Mkdir(args[0], mode), nil)
}

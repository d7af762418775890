//go:build amd64

package inputwait

import (
	"bytes"
	"encoding/binary"
	"io/fs"
	"slices"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The /proc files of a check are opened and stat'ed with raw system calls on
// NUL-terminated paths kept in reused buffers: unix.Openat and unix.Fstatat
// would allocate a copy of every path, on every check.

// appendPath appends "PID[/task/TID]/NAME[FD]\x00", a path relative to /proc.
func appendPath(b []byte, pid, tid int, name string, fd int) []byte {
	b = strconv.AppendInt(b, int64(pid), 10)
	if tid >= 0 {
		b = append(b, "/task/"...)
		b = strconv.AppendInt(b, int64(tid), 10)
	}
	b = append(b, '/')
	b = append(b, name...)
	if fd >= 0 {
		b = strconv.AppendInt(b, int64(fd), 10)
	}
	return append(b, 0)
}

func pathErr(op string, path []byte, err error) error {
	return &fs.PathError{Op: op, Path: "/proc/" + string(path[:len(path)-1]), Err: err}
}

func (p *Probe) open(path []byte, flags int) (int, error) {
	fd, _, errno := unix.Syscall6(unix.SYS_OPENAT, uintptr(p.procfd), uintptr(unsafe.Pointer(&path[0])),
		uintptr(flags|unix.O_CLOEXEC), 0, 0, 0)
	if errno != 0 {
		return -1, pathErr("open", path, errno)
	}
	return int(fd), nil
}

// stat stats path into p.st, following the symlink: for /proc/PID/fd/N, the
// open file itself.
func (p *Probe) stat(path []byte) error {
	_, _, errno := unix.Syscall6(unix.SYS_NEWFSTATAT, uintptr(p.procfd), uintptr(unsafe.Pointer(&path[0])),
		uintptr(unsafe.Pointer(&p.st)), 0, 0, 0)
	if errno != 0 {
		return pathErr("stat", path, errno)
	}
	return nil
}

// read reads the file at p.path into p.buf, growing it as needed, and
// returns its length. A file the kernel prints as one seq_file record (stat,
// syscall) is complete after a short read, which saves the read that would
// return 0; others (children) come a page at a time and are read to the end.
func (p *Probe) read(oneRecord bool) (int, error) {
	fd, err := p.open(p.path, unix.O_RDONLY)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	n := 0
	for {
		m, err := unix.Read(fd, p.buf[n:])
		if err != nil {
			return 0, pathErr("read", p.path, err)
		}
		n += m
		if m == 0 || oneRecord && n < len(p.buf) {
			return n, nil
		}
		if n == len(p.buf) {
			p.buf = slices.Grow(p.buf, len(p.buf))[:2*len(p.buf)]
		}
	}
}

// parseStat parses what a check needs from /proc/PID/stat or
// /proc/PID/task/TID/stat. The command name is free text that may hold
// spaces and parentheses, so fields are counted after the last ')'.
func parseStat(b []byte) (state byte, pgrp, threads int, ok bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, 0, false
	}
	rest := b[i+1:]
	// After the name: state(0) ppid(1) pgrp(2) ... num_threads(17).
	for field := 0; field <= 17; field++ {
		var f []byte
		if f, rest = nextField(rest); len(f) == 0 {
			return 0, 0, 0, false
		}
		switch field {
		case 0:
			state = f[0]
		case 2, 17:
			v, ok := parseUint(f, 10)
			if !ok {
				return 0, 0, 0, false
			}
			if field == 2 {
				pgrp = int(v)
			} else {
				threads = int(v)
			}
		}
	}
	return state, pgrp, threads, true
}

// parsePpid reads the parent's pid from /proc/PID/stat.
func parsePpid(b []byte) (int, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	rest := b[i+1:]
	var f []byte
	for range 2 {
		if f, rest = nextField(rest); len(f) == 0 {
			return 0, false
		}
	}
	v, ok := parseUint(f, 10)
	return int(v), ok
}

// parseSyscall parses /proc/PID/task/TID/syscall: "NR ARG0 ... ARG5 SP PC"
// (decimal number, hex arguments) for a task blocked in a system call,
// "-1 SP PC" for one blocked elsewhere, "running" for one on a CPU.
func parseSyscall(b []byte, args *[6]uint64) (int, bool) {
	f, rest := nextField(b)
	nr, ok := parseUint(f, 10)
	if !ok {
		return 0, false
	}
	for i := range args {
		f, rest = nextField(rest)
		if args[i], ok = parseUint(f, 16); !ok {
			return 0, false
		}
	}
	return int(nr), true
}

// parseEpollEntry parses a "tfd:" line of an epoll fdinfo.
func parseEpollEntry(line []byte) (tfd int32, events, ino, sdev uint64, ok bool) {
	f, rest := nextField(line)
	if string(f) != "tfd:" {
		return 0, 0, 0, 0, false
	}
	f, rest = nextField(rest)
	fd, ok := parseUint(f, 10)
	if !ok {
		return 0, 0, 0, 0, false
	}
	var seen int
	for {
		if f, rest = nextField(rest); len(f) == 0 {
			break
		}
		switch {
		case string(f) == "events:":
			f, rest = nextField(rest)
			events, ok = parseUint(f, 16)
		case bytes.HasPrefix(f, []byte("ino:")):
			ino, ok = parseUint(f[len("ino:"):], 16)
		case bytes.HasPrefix(f, []byte("sdev:")):
			sdev, ok = parseUint(f[len("sdev:"):], 16)
		default:
			continue
		}
		if !ok {
			return 0, 0, 0, 0, false
		}
		seen++
	}
	return int32(fd), events, ino, sdev, seen == 3
}

// appendDirents appends the numeric names among getdents64 records.
func appendDirents(ids []int, b []byte) []int {
	// struct linux_dirent64: u64 ino, s64 off, u16 reclen, u8 type, name.
	const nameOff = 19
	for len(b) >= nameOff {
		reclen := int(binary.NativeEndian.Uint16(b[16:]))
		if reclen < nameOff || reclen > len(b) {
			break
		}
		name := b[nameOff:reclen]
		if i := bytes.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		if id, ok := parseUint(name, 10); ok {
			ids = append(ids, int(id))
		}
		b = b[reclen:]
	}
	return ids
}

// nextField returns the first blank-separated field of b and what follows.
func nextField(b []byte) (field, rest []byte) {
	i := 0
	for i < len(b) && isBlank(b[i]) {
		i++
	}
	j := i
	for j < len(b) && !isBlank(b[j]) {
		j++
	}
	return b[i:j], b[j:]
}

func isBlank(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n'
}

// parseUint parses an unsigned decimal or hex ("0x" optional) number that
// fits in 64 bits.
func parseUint(b []byte, base uint64) (uint64, bool) {
	maxDigits := 19
	if base == 16 {
		b = bytes.TrimPrefix(b, []byte("0x"))
		maxDigits = 16
	}
	if len(b) == 0 || len(b) > maxDigits {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		var d uint64
		switch {
		case '0' <= c && c <= '9':
			d = uint64(c - '0')
		case base == 16 && 'a' <= c && c <= 'f':
			d = uint64(c-'a') + 10
		default:
			return 0, false
		}
		v = v*base + d
	}
	return v, true
}

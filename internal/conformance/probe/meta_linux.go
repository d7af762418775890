package main

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// fsNodumpFl is FS_NODUMP_FL, an inode flag an owner may set.
const fsNodumpFl = 0x40

// atFdcwd is AT_FDCWD as a system call argument.
var atFdcwd = func() uintptr { fd := unix.AT_FDCWD; return uintptr(fd) }()

// probeXattr is the extended attribute the probe sets, reads and removes.
const probeXattr = "user.sandboxd-probe"

// linuxMetaOps are the metadata calls only Linux has: extended
// attributes, inode flags through an ioctl on any fd of the file, the
// newest system calls of each family, and metadata through an fd opened
// without write access.
func linuxMetaOps() map[string]op {
	return map[string]op{
		"setxattr":    {1, setxattr},
		"removexattr": {1, removexattr},
		"getxattr":    {1, getxattr},
		"listxattr":   {1, listxattr},
		"chattr":      {1, chattr},
		"fchmod-ro":   {1, fchmodReadOnly},
		"fchmodat2":   {1, fchmodat2},
		"setxattrat":  {1, setxattrat},
		"statx":       {1, statx},
		"opath-stat":  {1, opathStat},
		// Set file capabilities (cap_setuid+ep, version 2).
		"setcap": {1, setcap},
		// openat2 opening a name O_PATH, then asking the fd.
		"openat2-opath": {1, openat2OPath},
		// openat2 creating a plain 0644 file.
		"openat2-create": {1, openat2Create},
	}
}

func setxattr(args []string) Result {
	return outcome(unix.Setxattr(args[0], probeXattr, []byte("probe"), 0), nil)
}

func removexattr(args []string) Result {
	return outcome(unix.Removexattr(args[0], probeXattr), nil)
}

func getxattr(args []string) Result {
	b := make([]byte, 256)
	n, err := unix.Getxattr(args[0], probeXattr, b)
	if err != nil {
		return outcome(err, nil)
	}
	return outcome(nil, string(b[:n]))
}

func listxattr(args []string) Result {
	b := make([]byte, 4096)
	n, err := unix.Listxattr(args[0], b)
	if err != nil {
		return outcome(err, nil)
	}
	return outcome(nil, string(b[:n]))
}

// chattr sets FS_NODUMP_FL, which an owner may set, through a read-only
// fd: the kernel asks for ownership, not write access.
func chattr(args []string) Result {
	f, err := os.Open(args[0])
	if err != nil {
		return outcome(err, "open")
	}
	defer f.Close()
	flags, err := unix.IoctlGetUint32(int(f.Fd()), unix.FS_IOC_GETFLAGS)
	if err != nil {
		return outcome(err, "FS_IOC_GETFLAGS")
	}
	flags |= fsNodumpFl
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), unix.FS_IOC_SETFLAGS, uintptr(unsafe.Pointer(&flags)))
	if errno != 0 {
		return outcome(errno, "FS_IOC_SETFLAGS")
	}
	return outcome(nil, nil)
}

// fchmodReadOnly changes the mode through an fd opened for reading only.
func fchmodReadOnly(args []string) Result {
	f, err := os.Open(args[0])
	if err != nil {
		return outcome(err, "open")
	}
	defer f.Close()
	return outcome(unix.Fchmod(int(f.Fd()), 0o606), nil)
}

// fchmodat2 is Linux 6.6's chmod, which takes flags.
func fchmodat2(args []string) Result {
	p, err := unix.BytePtrFromString(args[0])
	if err != nil {
		return outcome(err, nil)
	}
	_, _, errno := unix.Syscall6(unix.SYS_FCHMODAT2, atFdcwd, uintptr(unsafe.Pointer(p)), 0o606, 0, 0, 0)
	if errno != 0 {
		return outcome(errno, nil)
	}
	return outcome(nil, nil)
}

// setxattrat is Linux 6.13's setxattr, which takes a dirfd and flags.
func setxattrat(args []string) Result {
	p, err := unix.BytePtrFromString(args[0])
	if err != nil {
		return outcome(err, nil)
	}
	name, _ := unix.BytePtrFromString(probeXattr)
	value := []byte("probe")
	xa := struct {
		value uint64
		size  uint32
		flags uint32
	}{uint64(uintptr(unsafe.Pointer(&value[0]))), uint32(len(value)), 0}
	_, _, errno := unix.Syscall6(unix.SYS_SETXATTRAT, atFdcwd, uintptr(unsafe.Pointer(p)), 0,
		uintptr(unsafe.Pointer(name)), uintptr(unsafe.Pointer(&xa)), unsafe.Sizeof(xa))
	if errno != 0 {
		return outcome(errno, nil)
	}
	return outcome(nil, nil)
}

func statx(args []string) Result {
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, args[0], unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BASIC_STATS, &st); err != nil {
		return outcome(err, nil)
	}
	return outcome(nil, statDetail(uint32(st.Mode), int64(st.Size), st.Mtime.Sec))
}

// opathStat opens the name without reading it (O_PATH), then asks the fd.
func opathStat(args []string) Result {
	fd, err := unix.Open(args[0], unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return outcome(err, "open")
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return outcome(err, "fstat")
	}
	return outcome(nil, statDetail(uint32(st.Mode), st.Size, st.Mtim.Sec))
}

func openat2Create(args []string) Result {
	fd, err := unix.Openat2(unix.AT_FDCWD, args[0], &unix.OpenHow{Flags: unix.O_CREAT | unix.O_WRONLY | unix.O_CLOEXEC, Mode: 0o644})
	if err == nil {
		unix.Close(fd)
	}
	return outcome(err, nil)
}

func setcap(args []string) Result {
	// struct vfs_cap_data, revision 2, effective: CAP_SETUID (7)
	// permitted.
	capData := []byte{0x01, 0x00, 0x00, 0x02, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	return outcome(unix.Setxattr(args[0], "security.capability", capData, 0), nil)
}

func openat2OPath(args []string) Result {
	fd, err := unix.Openat2(unix.AT_FDCWD, args[0], &unix.OpenHow{Flags: unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC})
	if err != nil {
		return outcome(err, "openat2")
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return outcome(err, "fstat")
	}
	return outcome(nil, statDetail(uint32(st.Mode), st.Size, st.Mtim.Sec))
}

package launcherlinux

import (
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// The filter's tables carry numbers the supervisor also dispatches on and
// names the records carry: both must be the kernel's.
func TestSyscallTablesMatchTheKernel(t *testing.T) {
	kernel := map[string]uintptr{
		"creat": unix.SYS_CREAT, "truncate": unix.SYS_TRUNCATE, "mkdir": unix.SYS_MKDIR, "mkdirat": unix.SYS_MKDIRAT,
		"mknod": unix.SYS_MKNOD, "mknodat": unix.SYS_MKNODAT, "unlink": unix.SYS_UNLINK, "unlinkat": unix.SYS_UNLINKAT,
		"rmdir": unix.SYS_RMDIR, "rename": unix.SYS_RENAME, "renameat": unix.SYS_RENAMEAT, "renameat2": unix.SYS_RENAMEAT2,
		"link": unix.SYS_LINK, "linkat": unix.SYS_LINKAT, "symlink": unix.SYS_SYMLINK, "symlinkat": unix.SYS_SYMLINKAT,
		"openat2": unix.SYS_OPENAT2, "open": unix.SYS_OPEN, "openat": unix.SYS_OPENAT,
		"shmget": unix.SYS_SHMGET, "shmat": unix.SYS_SHMAT, "shmctl": unix.SYS_SHMCTL, "semget": unix.SYS_SEMGET,
		"semop": unix.SYS_SEMOP, "semctl": unix.SYS_SEMCTL, "shmdt": unix.SYS_SHMDT, "msgget": unix.SYS_MSGGET,
		"msgsnd": unix.SYS_MSGSND, "msgrcv": unix.SYS_MSGRCV, "msgctl": unix.SYS_MSGCTL, "semtimedop": unix.SYS_SEMTIMEDOP,
		"mq_open": unix.SYS_MQ_OPEN, "mq_unlink": unix.SYS_MQ_UNLINK, "mq_timedsend": unix.SYS_MQ_TIMEDSEND,
		"mq_timedreceive": unix.SYS_MQ_TIMEDRECEIVE, "mq_notify": unix.SYS_MQ_NOTIFY, "mq_getsetattr": unix.SYS_MQ_GETSETATTR,
		"ptrace": unix.SYS_PTRACE, "unshare": unix.SYS_UNSHARE, "setns": unix.SYS_SETNS, "mount": unix.SYS_MOUNT,
		"bpf": unix.SYS_BPF, "keyctl": unix.SYS_KEYCTL, "clone": unix.SYS_CLONE, "ioctl": unix.SYS_IOCTL, "socket": unix.SYS_SOCKET,
		"chmod": unix.SYS_CHMOD, "fchmod": unix.SYS_FCHMOD, "fchmodat": unix.SYS_FCHMODAT, "fchmodat2": unix.SYS_FCHMODAT2,
		"chown": unix.SYS_CHOWN, "fchown": unix.SYS_FCHOWN, "lchown": unix.SYS_LCHOWN, "fchownat": unix.SYS_FCHOWNAT,
		"utime": unix.SYS_UTIME, "utimes": unix.SYS_UTIMES, "futimesat": unix.SYS_FUTIMESAT, "utimensat": unix.SYS_UTIMENSAT,
		"setxattr": unix.SYS_SETXATTR, "lsetxattr": unix.SYS_LSETXATTR, "fsetxattr": unix.SYS_FSETXATTR,
		"removexattr": unix.SYS_REMOVEXATTR, "lremovexattr": unix.SYS_LREMOVEXATTR, "fremovexattr": unix.SYS_FREMOVEXATTR,
		"setxattrat": unix.SYS_SETXATTRAT, "removexattrat": unix.SYS_REMOVEXATTRAT, "file_setattr": unix.SYS_FILE_SETATTR,
		"stat": unix.SYS_STAT, "lstat": unix.SYS_LSTAT, "newfstatat": unix.SYS_NEWFSTATAT, "statx": unix.SYS_STATX,
		"access": unix.SYS_ACCESS, "faccessat": unix.SYS_FACCESSAT, "faccessat2": unix.SYS_FACCESSAT2,
		"readlink": unix.SYS_READLINK, "readlinkat": unix.SYS_READLINKAT, "getxattr": unix.SYS_GETXATTR, "lgetxattr": unix.SYS_LGETXATTR,
		"listxattr": unix.SYS_LISTXATTR, "llistxattr": unix.SYS_LLISTXATTR, "getxattrat": unix.SYS_GETXATTRAT,
		"listxattrat": unix.SYS_LISTXATTRAT, "file_getattr": unix.SYS_FILE_GETATTR, "statfs": unix.SYS_STATFS,
		"chdir": unix.SYS_CHDIR, "inotify_add_watch": unix.SYS_INOTIFY_ADD_WATCH,
		"quotactl_fd": unix.SYS_QUOTACTL_FD, "open_tree_attr": unix.SYS_OPEN_TREE_ATTR,
		"syslog": unix.SYS_SYSLOG, "uselib": unix.SYS_USELIB, "ustat": unix.SYS_USTAT, "sysfs": unix.SYS_SYSFS, "vhangup": unix.SYS_VHANGUP, "pivot_root": unix.SYS_PIVOT_ROOT, "_sysctl": unix.SYS__SYSCTL, "acct": unix.SYS_ACCT, "settimeofday": unix.SYS_SETTIMEOFDAY, "umount2": unix.SYS_UMOUNT2,
		"swapon": unix.SYS_SWAPON, "swapoff": unix.SYS_SWAPOFF, "reboot": unix.SYS_REBOOT, "iopl": unix.SYS_IOPL, "ioperm": unix.SYS_IOPERM, "create_module": unix.SYS_CREATE_MODULE, "init_module": unix.SYS_INIT_MODULE, "delete_module": unix.SYS_DELETE_MODULE, "quotactl": unix.SYS_QUOTACTL, "nfsservctl": unix.SYS_NFSSERVCTL, "lookup_dcookie": unix.SYS_LOOKUP_DCOOKIE, "clock_settime": unix.SYS_CLOCK_SETTIME, "kexec_load": unix.SYS_KEXEC_LOAD,
		"add_key": unix.SYS_ADD_KEY, "request_key": unix.SYS_REQUEST_KEY, "move_pages": unix.SYS_MOVE_PAGES, "perf_event_open": unix.SYS_PERF_EVENT_OPEN,
		"fanotify_init": unix.SYS_FANOTIFY_INIT, "name_to_handle_at": unix.SYS_NAME_TO_HANDLE_AT, "open_by_handle_at": unix.SYS_OPEN_BY_HANDLE_AT,
		"clock_adjtime": unix.SYS_CLOCK_ADJTIME, "process_vm_readv": unix.SYS_PROCESS_VM_READV, "process_vm_writev": unix.SYS_PROCESS_VM_WRITEV, "kcmp": unix.SYS_KCMP, "finit_module": unix.SYS_FINIT_MODULE, "kexec_file_load": unix.SYS_KEXEC_FILE_LOAD, "userfaultfd": unix.SYS_USERFAULTFD,
		"io_uring_setup": unix.SYS_IO_URING_SETUP, "io_uring_enter": unix.SYS_IO_URING_ENTER, "io_uring_register": unix.SYS_IO_URING_REGISTER, "open_tree": unix.SYS_OPEN_TREE, "move_mount": unix.SYS_MOVE_MOUNT, "fsopen": unix.SYS_FSOPEN, "fsconfig": unix.SYS_FSCONFIG, "fsmount": unix.SYS_FSMOUNT,
		"fspick": unix.SYS_FSPICK, "mount_setattr": unix.SYS_MOUNT_SETATTR, "adjtimex": unix.SYS_ADJTIMEX,
	}
	check := func(name string, nr uint32) {
		if k, ok := kernel[name]; ok && uint32(k) != nr {
			t.Errorf("%s: %d, the kernel's is %d", name, nr, k)
		}
	}
	all := slices.Concat(amd64Denied, amd64SysVIPC, amd64WriteCalls, amd64MetaCalls, amd64LookupCalls)
	for _, s := range all {
		if _, ok := kernel[s.name]; !ok {
			t.Errorf("%s: not checked against the kernel's number", s.name)
		}
		check(s.name, s.nr)
	}
	for nr, name := range fsCallNames {
		check(name, uint32(nr))
	}
	ioctls := map[string]uint32{
		"FS_IOC_SETFLAGS":      unix.FS_IOC_SETFLAGS,
		"FS_IOC_ENABLE_VERITY": unix.FS_IOC_ENABLE_VERITY, "FS_IOC_SET_ENCRYPTION_POLICY": unix.FS_IOC_SET_ENCRYPTION_POLICY,
	}
	for _, c := range inodeIoctls {
		if k, ok := ioctls[c.name]; ok && k != c.cmd {
			t.Errorf("%s: %#x, the kernel's is %#x", c.name, c.cmd, k)
		}
	}
	for nr, name := range writeCallNames {
		check(name, uint32(nr))
	}
	for nr, name := range refusedNames {
		check(name, nr)
	}
}

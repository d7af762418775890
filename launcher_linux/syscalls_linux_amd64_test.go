package launcherlinux

import (
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
	}
	check := func(name string, nr uint32) {
		if k, ok := kernel[name]; ok && uint32(k) != nr {
			t.Errorf("%s: %d, the kernel's is %d", name, nr, k)
		}
	}
	for _, s := range append(append(append([]syscallName(nil), amd64Denied...), amd64SysVIPC...), amd64WriteCalls...) {
		check(s.name, s.nr)
	}
	for nr, name := range writeCallNames {
		check(name, uint32(nr))
	}
	for nr, name := range refusedNames {
		check(name, nr)
	}
}

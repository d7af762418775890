package launcherlinux

import (
	"sync"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// Which field a recorded refusal names:
//
//   - filesystem.write, filesystem.read_only, filesystem.deny: a
//     write-intent call the mounts or Landlock refuse; the policy path it
//     lies in decides between them, else the write roots do.
//   - process: a syscall the seccomp filter refuses (the deny list, clone
//     with CLONE_NEW* flags, TIOCSTI and TIOCLINUX, SysV IPC where there is
//     no ipc namespace), and a write beneath what the sandbox's own /proc
//     keeps read-only or masked.
//   - network.mode: socket() of a family or type the network mode
//     refuses (the landlock set refuses unix sockets but stream ones under
//     network HOST on its behalf), a connect() the daemon performs that the
//     private network namespace, or on the landlock set the listener's
//     owner, does not let through, and an abstract bind on the landlock set.

// denialSources says, per kind of refusal, whether the daemon records it
// for plan on host, and how; none is network NONE.
func denialSources(plan *Plan, host Host, none bool) []*sandboxdv1.DenialSource {
	unobserved := ""
	switch {
	case len(plan.Exec.Seccomp) == 0:
		unobserved = "not observed: no seccomp filter on this host, so no listener"
	case plan.Supervise == nil:
		unobserved = "not observed: seccomp user notification unavailable: " + host.NotifyMissing
	}
	src := func(kind, how string) *sandboxdv1.DenialSource {
		if unobserved != "" {
			return &sandboxdv1.DenialSource{Kind: kind, How: unobserved}
		}
		return &sandboxdv1.DenialSource{Kind: kind, Observed: true, How: how}
	}
	refusers := "the read-only mounts (EROFS), masks (EACCES) and Landlock (EACCES)"
	if plan.Set == SetLandlock {
		refusers = "Landlock (EACCES)"
	}
	write := src("filesystem.write", "seccomp user notification of every call that may write a name (open and openat with write flags, openat2, creat, truncate, mkdir, mknod, unlink, rmdir, rename, link, symlink and their *at forms): the daemon resolves the path as the sandbox sees it, judges it against the planned mounts and Landlock rules, records a refusal, and lets the kernel carry the call out, so that "+refusers+" refuse it, not the daemon; named filesystem.read_only or filesystem.deny within those paths")
	meta := "the daemon records what the read-only mounts refuse (EROFS) and lets the kernel carry the call out"
	if plan.Set == SetLandlock {
		meta = "the daemon performs the call itself, on the inode it resolved with the sandbox's credentials, inside the write roots only, and records what it refuses (EROFS; EACCES at a deny path)"
		if plan.Supervise.GetEmulate().GetLookups() {
			meta += "; stat, access, readlink, xattr reads, statfs, chdir, inotify watches and O_PATH opens likewise, refused with EACCES and recorded as filesystem.deny when they reach a deny path"
		}
	}
	if unobserved == "" {
		write.How += "; every call that changes an inode's mode, owner, times, extended attributes, inode flags or fs-verity (chmod, chown, utime, setxattr, removexattr families with their f, l and *at forms, FS_IOC_SETFLAGS, FS_IOC_FSSETXATTR, FS_IOC_ENABLE_VERITY and the other inode ioctls): " + meta
	}
	read := &sandboxdv1.DenialSource{Kind: "filesystem.read", How: "not observed: intercepting every open() would cost a daemon round trip each; Landlock audit records need the kernel audit subsystem, which the daemon does not turn on"}

	var network *sandboxdv1.DenialSource
	switch {
	case plan.Set == SetLandlock && none:
		network = src("network.mode", "seccomp user notification: the daemon answers every socket() but a unix stream one EPERM and records it (socketpair is allowed), performs every connect() itself, recording a unix address whose listener no process of the session holds (ECONNREFUSED), and performs every bind(), recording an abstract name (EPERM) and a path outside the write roots")
	case plan.Set == SetLandlock:
		network = src("network.mode", "seccomp user notification: the daemon answers socket() of a unix type but stream EPERM and records it, and performs every connect() itself, recording a unix address whose listener no process of the session holds (ECONNREFUSED)")
	case !plan.NetNS:
		network = &sandboxdv1.DenialSource{Kind: "network.mode", Observed: true, How: "network HOST: nothing is refused"}
	default:
		network = src("network.mode", "seccomp user notification: the daemon answers socket() of a refused family or type EPERM and records it, and performs every connect() itself, recording a unix address other than the session socket (ECONNREFUSED) and an inet address that is unreachable or where nothing listens in the private network namespace; a non-blocking connect is recorded only when it fails at once")
	}
	how := "seccomp user notification: the daemon answers the deny-listed syscalls (ptrace, mount, unshare, setns, bpf, keyctl, io_uring, perf_event_open, ...), clone with CLONE_NEW* flags and TIOCSTI and TIOCLINUX EPERM and records them; "
	if plan.Set == SetLandlock {
		how += "also SysV IPC and POSIX message queues; signals and ptrace that Landlock scopes to the sandbox are refused unrecorded; "
	} else {
		how += "writes to what the sandbox's /proc keeps read-only or masked are recorded as filesystem.write calls are; "
	}
	how += "x32 syscalls are refused by the filter alone, unrecorded"
	write.How = intern(write.How)
	return []*sandboxdv1.DenialSource{write, read, network, src("process", intern(how))}
}

// descriptions holds one copy of each description denialSources puts
// together: every session keeps its plan's, and built afresh they came to
// about 1.5 KiB a session. There are a handful, one per kind of plan.
var descriptions sync.Map

func intern(s string) string {
	v, _ := descriptions.LoadOrStore(s, s)
	return v.(string)
}

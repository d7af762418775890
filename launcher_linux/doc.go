// Package launcherlinux is the Linux sandbox backend. It turns a
// launcher.PlanRequest into a plan (mounts, Landlock rules, a seccomp
// program, an enforcement report) with pure functions that are tested on
// every OS (BuildPlan), after the checks of the request against this host
// (session_linux.go); Start reads nothing else of the policy, and applies
// the plan with
// sandboxd-init, a static C program (cmd/sandboxd-init), as the sandbox's
// init (pid 1 of new user, mount, pid, ipc, uts, cgroup and usually net
// namespaces). The plan reaches it in a binary encoding
// (sandboxinit.Plan.MarshalBinary): the init decides nothing. It runs as the
// sandbox uid, the only uid of its user namespace, holding just the
// capabilities it needs to build the root; the command's process drops
// every capability and restricts itself with no_new_privs, Landlock and
// seccomp before its execve. The inits are cloned by spawner processes (one
// per processor, up to four), the same binary started by the daemon
// (spawner_linux.go), so that no launch forks the large daemon, and run on
// in their clones without an execve of their own; an init started ahead of
// its launch (initPool) has its namespaces, its mount namespace on a tmpfs
// of its own and its loopback up before the plan comes.
//
// Where the host has seccomp user notification, the init hands the
// listener of the command's filter to the daemon (notify_linux.go), which
// answers three kinds of call: what the policy refuses (always EPERM,
// recorded as a denial), connect() (the daemon performs it on a duplicate
// of the command's socket, connect_linux.go: a unix socket reaches the
// session socket, bound at SessionSocketPath for a session that may have
// children, and the session's own listeners, nothing else of the host's;
// without a network namespace, bind() under network none too), and calls that may write a name, which the daemon judges
// against the plan's model of the filesystem (writemodel.go,
// fswrite_linux.go) to record a refusal before it lets the kernel carry
// them out.
//
// A root caller's write root that the sandbox uid could not write by its
// mode is bound ID-mapped, its owner shown as the sandbox uid: only the
// host's root may map a filesystem's owners, so the daemon clones the root
// into a detached mount mapped through a user namespace of its own
// (idmap_linux.go) and hands it to the init, which attaches it where a
// plain bind would go. Before it forks the command, the init checks, as the
// command will be, that every write root is writable and the cwd can be
// entered; the daemon turns a failure into a refusal that names the path,
// its owner and mode (writeroots_linux.go).
//
// What governs each system call that reads or changes the filesystem,
// under each mechanism set ("notified" is seccomp user notification; a
// refusal the daemon sees is recorded as a denial naming the field):
//
//	calls                                      namespaces set                          landlock set
//	open, openat, openat2 to read; getdents    read-only root, masks; Landlock         Landlock READ_FILE, READ_DIR
//	  (exec: execve, execveat)                   READ_FILE, READ_DIR, EXECUTE            and EXECUTE (none on deny paths)
//	open* to write, creat, truncate,           read-only mounts (EROFS); Landlock      Landlock WRITE_FILE, TRUNCATE;
//	  ftruncate, fallocate, write, FICLONE       WRITE_FILE, TRUNCATE; notified to       notified to record; beneath a deny
//	                                             record                                  path the daemon answers EACCES
//	mkdir, mknod, symlink, link, unlink,       read-only mounts; Landlock MAKE_*,      Landlock MAKE_*, REMOVE_*, REFER;
//	  rmdir, rename and their *at forms          REMOVE_*, REFER; notified to record     notified; deny paths: EACCES
//	  (bind of a unix socket: MAKE_SOCK)                                                 (bind under network none: notified,
//	                                                                                     the daemon binds inside the write
//	                                                                                     roots, refuses abstract names)
//	chmod, fchmod, fchmodat, fchmodat2;        read-only mounts (EROFS, the fd's       notified: the daemon performs the
//	  chown, fchown, lchown, fchownat;           mount for the f-forms); notified to     call itself on the inode it
//	  utime, utimes, futimesat, utimensat;       record                                  resolved with the sandbox's ids,
//	  setxattr, removexattr and their l, f                                               inside the write roots only (else
//	  and *at forms                                                                      EROFS; EACCES at a deny path)
//	ioctl FS_IOC_SETFLAGS, FS_IOC_FSSETXATTR,  read-only mounts (the kernel's          notified: the daemon replays it on
//	  FS_IOC_SETVERSION, EXT4_IOC_SETVERSION,    mnt_want_write_file); notified to       a pidfd_getfd copy of the fd,
//	  FS_IOC_ENABLE_VERITY, FS_IOC_SET_          record                                  inside the write roots only
//	  ENCRYPTION_POLICY, BTRFS_IOC_SUBVOL_SETFLAGS
//	file_setattr, file_getattr (Linux 6.17)    read-only mounts; masks                 notified: ENOSYS, older kernels'
//	                                                                                     answer; programs fall back to
//	                                                                                     the ioctls above
//	stat, lstat, newfstatat, statx, access,    masks: beneath a deny directory the     notified when the policy has deny
//	  faccessat, faccessat2, readlink(at),       walk fails (EACCES); a deny file        paths: the daemon performs them
//	  getxattr, listxattr and their l and        shows the empty mask's metadata,        and answers EACCES at a deny
//	  *at forms, statfs, chdir,                  never its own                           path; without deny paths there
//	  inotify_add_watch, O_PATH opens                                                    is nothing to hide
//	openat2 (flags in memory)                  as open and openat above                with deny paths: ENOSYS from the
//	                                                                                     filter (programs fall back to
//	                                                                                     openat); else as openat
//	fstat, fstatfs, fgetxattr, flistxattr,     no fd of a deny path exists: the        the same: every open of a deny
//	  fchdir on an fd                            masks hide it from every open           path is refused or judged
//	name_to_handle_at, open_by_handle_at,      seccomp filter (EPERM)                  seccomp filter (EPERM)
//	  mount, umount2, pivot_root, fsopen,
//	  fsmount, fspick, fsconfig, open_tree,
//	  open_tree_attr, move_mount,
//	  mount_setattr, quotactl(_fd), swapon,
//	  swapoff, acct, io_uring_*, uselib
//	chroot, mknod of a device                  no capability (kernel permission)       no capability (kernel permission)
//
// The daemon's performing is exact, not check-then-use: it resolves a name
// one component at a time on a thread holding the sandbox's fs ids and no
// capability but CAP_SYS_PTRACE, refuses any walk that enters a deny path,
// pins what it reaches with an O_PATH fd and acts on that fd, so a name the
// sandbox swaps meanwhile changes nothing; it reads an fd argument once,
// with pidfd_getfd. What it judges by is where the pinned inode is: outside
// the write roots the sandbox cannot move an inode at all, and Landlock's
// REFER keeps it from linking one in.
//
// Process tree inside the sandbox:
//
//	sandboxd-spawner (outside, the daemon's uid: one per processor, up to four, clones the inits)
//	└── sandboxd-init (pid 1, the sandbox uid, setup capabilities, not dumpable)
//	└── command (the sandbox uid, no capabilities, restricted)
package launcherlinux

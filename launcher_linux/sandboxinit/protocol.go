package sandboxinit

import "syscall"

// Arg0 is the argv[0] that makes the init binary a sandbox init.
const Arg0 = "sandboxd-init"

// UsernsArg0 is the argv[0] that makes the init binary only hold the user
// namespace it was cloned into until its stdin closes: the daemon opens
// that namespace to ID-map write roots with, and a namespace needs a
// process to be made.
const UsernsArg0 = "sandboxd-userns"

// SpawnerArg0 is the argv[0] that makes the init binary the daemon's
// spawner, which clones every init.
const SpawnerArg0 = "sandboxd-spawner"

// The init gets its plan on fd 3 (MarshalBinary) and reports on fd 4, one
// JSON Message a line. On fd 5, a unix socket, the daemon and the init hand
// each other fds (SCM_RIGHTS), each message one of these tag bytes.
const (
	// PassTerminal is a PTY session's terminal master, made in the
	// sandbox's own devpts.
	PassTerminal = 'T'
	// PassListener is the seccomp listener of the command's filter.
	PassListener = 'N'
	// PassRootDir is the sandbox's root directory, from which the daemon
	// resolves the paths the command passes.
	PassRootDir = 'R'
	// PassCgroup comes from the daemon, after the stdio: the tasks files
	// of the session's cgroup v1 leaves, into which the command's process
	// moves itself (ExecPlan.CgroupTasks).
	PassCgroup = 'C'
	// PassProxy is the listening socket in the sandbox's network
	// namespace that the daemon serves its allowlist proxy on.
	PassProxy = 'P'
	// PassDiag is a NETLINK_SOCK_DIAG socket made in the sandbox's network
	// namespace, after the root directory, when the sandbox has one: with
	// it the daemon tells a unix socket the sandbox listens on from any
	// other, as only the sandbox's own are in its namespace.
	PassDiag = 'D'
	// PassForward is a listener on the sandbox's 127.0.0.1 at a port of
	// Plan.LoopbackForwards, one each, in that order, after PassProxy.
	PassForward = 'F'
	// PassMount comes from the daemon, first of all: an ID-mapped clone
	// of a write root (MountStep.Idmapped) or a shared file's read-only
	// mount (MountStep.Shared), one message each, in plan order.
	PassMount = 'M'
	// PassStdio comes from the daemon with a pipe session's stdin, stdout
	// and stderr, before the plan: an init is started before the session
	// it will serve is known.
	PassStdio = 'S'
)

// Message is one JSON line from the init to the daemon.
type Message struct {
	Type   string `json:"type"` // setup-error, exec-error, started, exit
	Field  string `json:"field,omitempty"`
	Op     string `json:"op,omitempty"`
	Path   string `json:"path,omitempty"`
	Errno  int    `json:"errno,omitempty"`
	Detail string `json:"detail,omitempty"`
	// Blocker is, for a path the command could not use, the directory
	// on its way that stops the sandbox uid: the path itself or an
	// ancestor it may not search.
	Blocker string `json:"blocker,omitempty"`
	Code    int    `json:"code,omitempty"`
	Signal  int    `json:"signal,omitempty"`
}

// SigKillAll asks a namespace-less init to kill every process of its
// sandbox. Landlock's signal scope keeps the sandbox from sending it.
const SigKillAll = syscall.Signal(36)

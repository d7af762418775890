package launcherlinux

import (
	"fmt"
	"slices"
	"strings"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/launcher"
)

// landlockDevices are the host device nodes a landlock-set sandbox may
// open for writing: without a private /dev, everything else under /dev is
// the host's.
var landlockDevices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"}

// buildLandlockPlan plans a sandbox without namespaces. The command sees
// the host's filesystem tree, its /tmp and /dev included, through Landlock
// rules; seccomp stands in for the network namespace and the rest.
func buildLandlockPlan(in launcher.PlanRequest, host Host) (*Plan, error) {
	p := in.Policy
	fs := p.GetFilesystem()
	if sf := landlockPolicyShortfall(fs); sf != nil {
		return nil, refusal([]MechanismSet{SetLandlock}, []*shortfall{sf})
	}
	if in.SessionSocket != "" {
		return nil, refusal([]MechanismSet{SetLandlock}, []*shortfall{childrenShortfall})
	}
	if sf := daemonStateShortfall(fs.GetWrite(), slices.Concat(in.Protect, in.HideSockets)); sf != nil {
		return nil, refusal([]MechanismSet{SetLandlock}, []*shortfall{sf})
	}
	if host.LandlockABI < landlockScopeABI || host.NoSeccomp {
		return nil, &launcher.Unenforceable{
			Field: "process", Mechanism: fmt.Sprintf("landlock ABI %d and seccomp", landlockScopeABI),
			Found: fmt.Sprintf("landlock ABI %d, seccomp available: %v", host.LandlockABI, !host.NoSeccomp), Remedy: "run on a kernel with Landlock ABI 6 and seccomp, or where the namespaces set works",
		}
	}
	if !host.Notify {
		// Landlock does not govern mode, owner, times, extended
		// attributes or inode flags, nor lookups of a deny path: only the
		// daemon, performing those calls, can hold them to the policy.
		return nil, &launcher.Unenforceable{
			Field:     "filesystem.write",
			Mechanism: "seccomp user notification, so that the daemon performs chmod, chown, utimes, xattr and inode-flag calls only inside the write roots (Landlock governs none of them)",
			Found:     "seccomp user notification does not work here: " + host.NotifyMissing, Remedy: remedyNotify,
		}
	}
	none := p.GetNetwork().GetMode() != sandboxdv1.Network_HOST
	lookups := len(fs.GetDeny()) > 0
	// Unix stream sockets are allowed under every mode: their connects
	// reach only listeners the session holds. Under network none a bind
	// is the daemon's to perform, as an abstract name would be the host's.
	prog, err := SeccompProgram(SeccompOptions{
		NoSockets: none, NoUnixSockets: !none, UnixStream: true, NotifyConnect: true, NotifyBind: none,
		NoSysVIPC: true, Notify: true, NotifyLookups: lookups,
	})
	if err != nil {
		return nil, err
	}
	cwd := in.Cwd
	if cwd == "" {
		cwd = "/"
	}
	// Landlock does not govern chdir, and the init enters the cwd before
	// the daemon answers for the command's lookups: the command would
	// start inside the deny path.
	if err := cwdInDeny(fs, cwd); err != nil {
		return nil, err
	}
	plan := &Plan{Set: SetLandlock}
	// Outside every write root (else refused above) the daemon's state is
	// never writable; unreadable by file modes, it needs no read
	// exception, which would keep its parents from being listed.
	ll := planLandlockOnly(host.LandlockABI, fs.GetWrite(), slices.Concat(fs.GetDeny(), host.OpenToSandbox))
	plan.Exec = ExecPlan{
		Argv: in.Argv, Env: in.Env, Cwd: cwd, WriteRoots: usableRoots(fs.GetWrite()),
		UID: in.UID, GID: in.GID, Terminal: in.Terminal, Rows: in.Rows, Cols: in.Cols,
		Landlock: ll, Seccomp: prog, TerminalRule: in.Terminal, Listener: true,
	}
	// No mounts of its own: Landlock decides writes, the daemon the rest.
	plan.Supervise = &Supervision{
		Connect: true, SharedNetNS: true,
		Writes:  buildWriteModel(nil, ll, fs.GetReadOnly(), fs.GetDeny()),
		Emulate: &Emulation{UID: in.UID, GID: in.GID, Lookups: lookups},
	}
	plan.Report = append(reportLandlock(p, plan, host.OpenToSandbox), limitsReport(p, host)...)
	plan.DenialSources = append(denialSources(plan, host, none), limitDenialSources(p)...)
	return plan, nil
}

// daemonStateShortfall is why the landlock set cannot run a write root
// that holds one of the daemon's own paths: its state, which a sandbox
// writing could make the daemon act for it, or a socket it could replace
// with its own. Without a mount namespace nothing takes them back out.
func daemonStateShortfall(writes, daemonPaths []string) *shortfall {
	for _, d := range daemonPaths {
		if r := innermostRoot(d, writes); r != "" {
			return &shortfall{
				field: "filesystem.write", byPolicy: true,
				mechanism: "a mount namespace (mask of the daemon's own state inside a write root)",
				found:     fmt.Sprintf("landlock cannot take access to %s, the daemon's state directory or socket, away beneath write root %s", d, r),
				remedy:    "allow user namespaces so the namespaces set can be used, or name write roots that do not hold the daemon's --state-dir and socket",
			}
		}
	}
	return nil
}

func planLandlockOnly(abi int, writes, deny []string) LandlockPlan {
	h := handledFS(abi)
	read := uint64(llReadFile|llReadDir|llExecute) & h
	var rules []LandlockRule
	if len(deny) == 0 {
		// A right on a directory reaches everything beneath it, so "/"
		// stays listable only when nothing beneath must stay unlisted.
		rules = append(rules, LandlockRule{Path: "/", Access: llReadDir})
	}
	for _, d := range landlockDevices {
		rules = append(rules, LandlockRule{Path: d, Access: (llReadFile | llWriteFile | llIoctlDev) & h})
	}
	for _, w := range sortedByDepth(writes) {
		rules = append(rules, LandlockRule{Path: w, Access: h})
	}
	return LandlockPlan{
		ABI: abi, HandledFS: h, Scoped: llScopeSignal | llScopeAbstractUnix, Rules: rules,
		// The host's /dev is never granted whole: only the device nodes
		// above and the session's terminal.
		ReadAccess: read, ReadExcept: sortedByDepth(append([]string{"/dev"}, deny...)),
		// No mount layer lies beneath: a directory on the way to a deny
		// path that cannot be listed must fail the launch, not be granted
		// whole.
		Strict: true,
	}
}

// ownSockets says how the landlock set tells the session's unix sockets
// from the host's, having no network or mount namespace to hide these.
const ownSockets = "connect: seccomp user notification, the daemon connects a unix socket only to a listener a process of the session holds"

func reportLandlock(p *sandboxdv1.Policy, plan *Plan, openState []string) []*sandboxdv1.FieldEnforcement {
	ll := fmt.Sprintf("landlock abi %d", plan.Exec.Landlock.ABI)
	f := func(field, mech string) *sandboxdv1.FieldEnforcement {
		return &sandboxdv1.FieldEnforcement{Field: field, Mechanism: mech}
	}
	fs := p.GetFilesystem()
	read := ll + " read rules on the host tree except /dev (no mount namespace: the host's /tmp is visible, read-only)"
	if len(openState) > 0 {
		// Left out as a deny path is, with what that costs.
		read += "; except too the daemon's state directory (" + strings.Join(openState, ", ") + "), which the sandbox's uid could enter by its modes: read granted on every sibling on the way, so the directories above it cannot be listed"
	}
	out := []*sandboxdv1.FieldEnforcement{
		f("filesystem.read", read),
		f("filesystem.write", ll+" full rights on the write roots only; of /dev only "+strings.Join(landlockDevices, ", ")+" and the session's terminal; "+
			"mode, owner, times, xattrs and inode flags (which Landlock does not govern): seccomp user notification, the daemon performs each call on the inode it resolved, inside the write roots only"),
	}
	if len(fs.GetReadOnly()) > 0 {
		out = append(out, f("filesystem.read_only", ll+": outside every write root, nothing is writable"))
	} else {
		out = append(out, f("filesystem.read_only", "none requested"))
	}
	if len(fs.GetDeny()) > 0 {
		out = append(out, f("filesystem.deny", ll+": read granted on every sibling on the way, never on the path; the directories above it cannot be listed, as a right on a directory reaches everything beneath; "+
			"stat, access, readlink, xattr reads, statfs, chdir, inotify and O_PATH opens: seccomp user notification, the daemon performs them and refuses any that reaches the path (EACCES)"))
	} else {
		out = append(out, f("filesystem.deny", "none requested"))
	}
	if p.GetNetwork().GetMode() != sandboxdv1.Network_HOST {
		out = append(out, f("network.mode", "seccomp: socket() fails for every family but unix stream sockets, no loopback either; socketpair allowed; "+ownSockets+
			"; bind: seccomp user notification, the daemon binds paths inside the write roots and refuses abstract names, which would be the host's"))
	} else {
		out = append(out, f("network.mode", "host network; seccomp refuses unix sockets but stream ones; "+ownSockets))
	}
	out = append(out, f("process", fmt.Sprintf("no namespaces; host uid %d, not root; no_new_privs, no capabilities, setsid; %s scopes signals and abstract unix sockets and confines ptrace; seccomp deny-list with SysV IPC; the init is a child subreaper that kills every descendant", plan.Exec.UID, ll)))
	if p.GetLimits().GetTimeout() != nil {
		out = append(out, f("limits.timeout", "daemon wall-clock timer, SIGKILL of every sandbox process"))
	}
	return out
}

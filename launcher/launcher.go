// Package launcher is the contract between the daemon and the per-OS sandbox
// backends: what to start (Spec), the running sandbox (Process), and the error
// a backend returns when the host cannot enforce a policy (Unenforceable).
//
// A backend has exactly one Start. Plain exec and PTY sessions differ only in
// the files placed in Spec.Stdio, so no path can skip the sandbox.
package launcher

import (
	"context"
	"errors"
	"maps"
	"net"
	"net/netip"
	"os"
	"slices"
	"syscall"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/policy"
)

// Spec is everything a backend needs to start one sandboxed process. The
// policy has already been validated and normalized by package policy; a
// backend never re-derives policy meaning beyond turning it into its plan.
type Spec struct {
	SessionID string
	Policy    *sandboxdv1.Policy
	// Digest is policy.Digest(Policy), exported to the sandbox.
	Digest string
	Argv   []string
	// Env is the complete environment of the process, "KEY=value". The daemon
	// builds it; nothing else is added by the backend.
	Env []string
	// Cwd is an absolute path inside the sandbox.
	Cwd string
	// UID and GID are the host identity the sandboxed process runs as. The
	// daemon never passes 0 here.
	UID, GID uint32
	// RootCaller says root started the session (for a child, its root
	// session). Root may grant its sandbox, which runs as another uid,
	// write roots of any owner, and a backend may show such a root to the
	// sandbox as its own. Anyone else's sandbox must never write what they
	// could not, so false, the zero value, allows no such mapping.
	RootCaller bool
	// CallerGroups are the groups of a caller that is not root (of the
	// root session's, for a child): its primary and supplementary groups.
	// The sandbox runs with the primary alone; a write root the caller
	// may write through another of them may be shown to the sandbox with
	// that group as its own.
	CallerGroups []uint32
	Stdio        Stdio
	// HideSockets are host paths of daemon sockets, or of directories of
	// them, that must not be reachable from inside the sandbox.
	HideSockets []string
	// Protect are host paths of the daemon's own state (its state
	// directory): what the daemon reads back and acts on, such as its
	// journal of paths to remove at start, so a sandbox that could change
	// it could make the daemon act for it. The backend makes them neither
	// readable nor writable inside the sandbox whatever the policy grants
	// (a grant of "/" still works), keeps them from being moved away, and
	// refuses the launch where it cannot: Linux masks them (the landlock
	// set refuses a write root holding them), macOS denies them in the
	// profile, and on Windows the state directory's own protected DACL
	// (sandboxd install) admits only SYSTEM and Administrators, whatever
	// a write root above it grants by inheritance.
	Protect []string
	// SessionSocket is the host path of the socket the daemon made for this
	// session alone (policy children.allow), empty when there is none. The
	// backend makes it reachable inside the sandbox at SessionSocketPath
	// (its host path where the OS has no mount namespaces), and nothing
	// else of the daemon's.
	SessionSocket string
	// OnDenial, when set, is called for each operation the sandbox refused
	// that the backend observes (see EnforcementReport.denial_sources). It
	// is called from the backend's own goroutines, possibly concurrently,
	// and must not block: the refused call waits for it.
	OnDenial func(*sandboxdv1.Denial)
	// ParentSessionID is the session whose sandbox asked for this one, ""
	// for a root session. A backend keeps a child within its parent's
	// resource budget (limits).
	ParentSessionID string
	// ParentMechanismSet is the mechanism set the parent's sandbox runs
	// under (its EnforcementReport's), "" for a root session. A backend
	// with several sets builds a child with its parent's or refuses it: a
	// child under another set would be confined by other means, some of
	// which show it what its parent never saw.
	ParentMechanismSet string
	// Proxy serves a network.mode ALLOWLIST sandbox's only way out: the
	// backend calls it, in a goroutine of its own, with the listener the
	// sandbox reaches at ProxyAddress, and closes the listener once the
	// sandbox has ended, which must make Proxy return. A backend refuses
	// an ALLOWLIST policy when Proxy is nil.
	Proxy func(net.Listener)
	// Forward serves one of the loopback forwards of such a sandbox: the
	// backend calls it, in a goroutine of its own, with a listener on the
	// sandbox's 127.0.0.1 at a port of the host's loopback the policy
	// allows, and to, that port of the host's; Forward joins each
	// connection the listener accepts to a new one to to. The backend
	// closes the listener once the sandbox has ended, which must make
	// Forward return. A backend fails to start a sandbox with such a port
	// when Forward is nil.
	Forward func(l net.Listener, to netip.AddrPort)
	// Layers maps each path of the policy's filesystem.layer to the root
	// of the mount the daemon made for it (package layers), which the
	// sandbox sees in the path's place. A backend refuses a layer it has
	// no mount for, and never writes to the path itself.
	Layers map[string]*os.File
}

// ProxyAddress is where an ALLOWLIST sandbox reaches the daemon's proxy,
// in its own network namespace. The daemon points the proxy variables of
// the command's environment at it.
const ProxyAddress = "127.0.0.1:3128"

// Stdio says how the process's fds 0, 1 and 2 are wired.
type Stdio struct {
	// Stdin, Stdout and Stderr are the files of a pipe session.
	Stdin, Stdout, Stderr *os.File
	// Terminal asks for a PTY session instead: the backend allocates the
	// terminal (inside the sandbox where the OS allows, so the process's tty
	// name resolves there), makes it the controlling terminal of a new
	// session, wires fds 0-2 to it, and returns the master from
	// Process.Terminal. The three files above are unused then.
	Terminal bool
	// Rows and Cols are the terminal's initial window size.
	Rows, Cols uint16
}

// Status is how a sandboxed process ended.
type Status struct {
	// ExitCode is meaningful when Signal is 0.
	ExitCode int
	// Signal is the signal that terminated the process, 0 if it exited.
	Signal syscall.Signal
	// Limit is the policy field whose limit ended the sandbox (e.g.
	// "limits.memory_bytes"), "" when none did.
	Limit string
}

// Process is a started sandbox.
type Process interface {
	// Pid is the host pid of the sandbox's outermost process.
	Pid() int
	// Enforcement is the report for what this process runs under, derived
	// from the plan the backend applied.
	Enforcement() *sandboxdv1.EnforcementReport
	// Terminal is the master side of a PTY session's terminal, nil for a
	// pipe session. The caller owns it and closes it.
	Terminal() *os.File
	// Signal delivers sig to the sandboxed command.
	Signal(sig syscall.Signal) error
	// Kill ends every process of the sandbox.
	Kill() error
	// Wait blocks until the sandboxed command has ended and every process of
	// the sandbox is gone, then releases what Start acquired.
	Wait() (Status, error)
}

// ExitNotifier is implemented by a Process that can say when it has ended
// without a goroutine blocked in Wait for as long as it runs, which for an
// idle session may be days.
type ExitNotifier interface {
	// NotifyExit starts f on a goroutine of its own once the sandboxed
	// command has ended, after which Wait returns without waiting long.
	// An error means f will not be started: the caller waits in Wait.
	NotifyExit(f func()) error
}

// InitProcess is implemented by a Process whose outermost process (Pid) is
// the backend's own init, which starts the command and stays: it is the
// sandbox's machinery, not part of what the command does, so whether the
// session waits is told from its descendants alone.
type InitProcess interface {
	PidIsInit() bool
}

// SessionSocketPlacer is implemented by a backend that shows a session's
// socket inside the sandbox at a path of its own choosing rather than at
// its host path.
type SessionSocketPlacer interface {
	// SessionSocketPath is where the sandbox reaches the session socket
	// whose host path is host.
	SessionSocketPath(host string) string
}

// Backend enforces policies on one OS.
type Backend interface {
	Name() string
	// Start launches spec.Argv under spec.Policy. It returns *Unenforceable
	// when some field cannot be enforced on this host, *ExecError when the
	// command could not be executed inside the sandbox, and otherwise a
	// running Process. It never starts a command with less confinement than
	// the policy asks.
	Start(ctx context.Context, spec Spec) (Process, error)
	// Capabilities reports what the backend found it can enforce on this
	// host: facts, probe results, mechanism sets and per-feature support.
	// The self-test is the daemon's to fill in.
	Capabilities() *sandboxdv1.CapabilitiesReport
}

// Needs are what a backend needs the daemon to run for its sandboxes,
// declared up front so that the daemon builds only what the backend uses
// and a backend without it refuses the same way on every OS.
type Needs struct {
	// Proxy: the backend confines network ALLOWLIST to the daemon's
	// allowlist proxy (Spec.Proxy). A backend without it has no mechanism
	// for ALLOWLIST.
	Proxy bool
}

// NeedsDeclarer is implemented by a backend that needs something of the
// daemon; one that does not implement it needs nothing.
type NeedsDeclarer interface {
	Needs() Needs
}

// NeedsOf is what backend b needs of the daemon.
func NeedsOf(b Backend) Needs {
	if d, ok := b.(NeedsDeclarer); ok {
		return d.Needs()
	}
	return Needs{}
}

// Refusal is why a backend with needs n cannot enforce p on any host, nil
// when nothing p asks for depends on what the backend lacks.
func (n Needs) Refusal(p *sandboxdv1.Policy) *Unenforceable {
	if p.GetNetwork().GetMode() == sandboxdv1.Network_ALLOWLIST && !n.Proxy {
		return &Unenforceable{Field: policy.FieldNetworkAllow, Mechanism: "daemon-run allowlist proxy", Found: "this sandboxd version has no mechanism for it on this OS", Remedy: "use network NONE or HOST"}
	}
	return nil
}

// ErrHostResources marks a launch that failed because the daemon or the
// host ran out of something a sandbox takes (file descriptors, processes,
// memory): not a policy the host cannot enforce, and not the caller's
// fault; it may work again once sessions end or the limit is raised.
var ErrHostResources = errors.New("out of host resources")

// PlanRequest is what every backend's planner plans from: the part of a
// Spec that decides what the sandbox may do, taken from it once
// (Spec.PlanRequest). A planner adds only what it learns of its host.
type PlanRequest struct {
	// Policy is validated and normalized (package policy).
	Policy    *sandboxdv1.Policy
	SessionID string
	Argv      []string
	Env       []string
	Cwd       string
	UID, GID  uint32
	// RootCaller and CallerGroups are Spec's: whose write roots the
	// sandbox may be shown as its own.
	RootCaller   bool
	CallerGroups []uint32
	// Terminal asks for a PTY session of Rows by Cols.
	Terminal   bool
	Rows, Cols uint16
	// HideSockets, Protect and SessionSocket are Spec's.
	HideSockets   []string
	Protect       []string
	SessionSocket string
	// Child says the session is another session's child.
	Child bool
	// ParentMechanismSet is Spec's.
	ParentMechanismSet string
	// Proxy says the daemon serves the session's allowlist proxy
	// (Spec.Proxy is set).
	Proxy bool
	// Layered are the paths of the policy's filesystem.layer the daemon
	// made a layer for (the keys of Spec.Layers), sorted.
	Layered []string
}

// PlanRequest is the request s's backend plans from.
func (s Spec) PlanRequest() PlanRequest {
	return PlanRequest{
		Policy: s.Policy, SessionID: s.SessionID, Argv: s.Argv, Env: s.Env, Cwd: s.Cwd,
		UID: s.UID, GID: s.GID, RootCaller: s.RootCaller, CallerGroups: s.CallerGroups, Terminal: s.Stdio.Terminal, Rows: s.Stdio.Rows, Cols: s.Stdio.Cols,
		HideSockets: s.HideSockets, Protect: s.Protect, SessionSocket: s.SessionSocket, Child: s.ParentSessionID != "",
		ParentMechanismSet: s.ParentMechanismSet,
		Proxy:              s.Proxy != nil,
		Layered:            slices.Sorted(maps.Keys(s.Layers)),
	}
}

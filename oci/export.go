package oci

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/launcher"
	launcherlinux "github.com/sandboxd/sandboxd/launcher_linux"
	"github.com/sandboxd/sandboxd/launcher_linux/sandboxinit"
	"github.com/sandboxd/sandboxd/policy"
)

// Refusal is a field that an OCI config cannot express: exporting without
// it would make a weaker sandbox, or reading it into a policy would
// ignore it.
type Refusal struct {
	// Field is a policy field ("network.allow") on export, a JSON path
	// into the config ("linux.seccomp.syscalls[3]") on import.
	Field  string
	Reason string
}

func (r *Refusal) Error() string { return r.Field + ": " + r.Reason }

// Input is one sandbox as sandboxd would launch it.
type Input struct {
	Policy *sandboxdv1.Policy
	Argv   []string
	// Env is what the request adds to the sandbox's defaults (PATH, HOME,
	// TERM, LANG), as with sandboxctl run --env.
	Env      map[string]string
	Cwd      string
	Terminal bool
	// UID and GID are the sandbox's host identity, never root's.
	UID, GID uint32
	// Home is the sandbox uid's home directory, "" for "/", as the daemon
	// reads it from the host's passwd file.
	Home string
	// Root is the config's root.path, a directory of its own: runtimes
	// pivot into it, which they cannot do into the host's "/" itself.
	Root string
	// Exists reports whether a host path exists and is a directory.
	Exists func(path string) (exists, isDir bool)
	// HideSockets are daemon sockets to mask, as the daemon masks its own.
	HideSockets []string
	// Protect is the daemon's state directory, kept from the container as
	// the daemon keeps it from its sandboxes (launcher.Spec.Protect).
	Protect []string
}

// existing are the paths of paths that exist: the daemon makes its own
// before it serves, and the planner refuses one missing beneath a write
// root, but a host the config is exported on may run no daemon, and what
// is not there has nothing to hide.
func existing(paths []string, exists func(string) (bool, bool)) []string {
	var out []string
	for _, p := range paths {
		if ok, _ := exists(p); ok {
			out = append(out, p)
		}
	}
	return out
}

// DefaultPath is the sandbox's PATH unless the request sets one; the
// daemon's (daemon/env_unix.go) is the same.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Env is the environment sandboxd gives a command: the defaults, then
// extra over them, sorted by name. The session's own variables are left
// out: there is no session outside sandboxd.
func Env(extra map[string]string, terminal bool, home string) []string {
	if home == "" {
		home = "/"
	}
	term := "dumb"
	if terminal {
		term = "xterm-256color"
	}
	env := map[string]string{"PATH": DefaultPath, "HOME": home, "TERM": term, "LANG": "C.UTF-8"}
	maps.Copy(env, extra)
	out := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}

// Version is the ociVersion of exported configs: every field they use is
// in runtime-spec 1.0.2, and runtimes refuse versions newer than they know
// (Debian 12's crun 1.8.1 answers "unknown version specified" to 1.2.0).
const Version = "1.0.2"

// Export is the OCI config that enforces in.Policy as sandboxd does, or a
// *Refusal naming the first field it cannot express.
func Export(in Input) (*specs.Spec, error) {
	if err := policy.Validate(in.Policy); err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	p := policy.Normalize(in.Policy)
	if err := inexpressible(p); err != nil {
		return nil, err
	}
	if in.UID == 0 || in.GID == 0 {
		return nil, &Refusal{Field: "process", Reason: "the sandbox uid and gid must not be root's"}
	}
	if len(in.Argv) == 0 {
		return nil, errors.New("no command")
	}
	if in.Root == "" {
		return nil, errors.New("no root directory")
	}
	env := Env(in.Env, in.Terminal, in.Home)
	plan, err := launcherlinux.BuildPlan(launcher.PlanRequest{
		Policy: p, Argv: in.Argv, Env: env, Cwd: in.Cwd, UID: in.UID, GID: in.GID,
		Terminal: in.Terminal, HideSockets: existing(in.HideSockets, in.Exists), Protect: existing(in.Protect, in.Exists),
	}, launcherlinux.Host{Set: launcherlinux.SetNamespaces, Exists: in.Exists})
	if err != nil {
		var u *launcher.Unenforceable
		if errors.As(err, &u) {
			return nil, &Refusal{Field: u.Field, Reason: u.Found}
		}
		return nil, fmt.Errorf("plan: %w", err)
	}

	s := &specs.Spec{
		Version:  Version,
		Hostname: plan.Hostname,
		Root:     &specs.Root{Path: in.Root, Readonly: true},
		Process: &specs.Process{
			Terminal: in.Terminal,
			// Container uid 0 is the one uid of the namespace, mapped to
			// the sandbox uid: runtimes need it mapped to set up, and
			// mapping a second host uid would give the bundle an identity
			// sandboxd's sandbox never has.
			User:            specs.User{UID: 0, GID: 0},
			Args:            plan.Exec.Argv,
			Env:             plan.Exec.Env,
			Cwd:             plan.Exec.Cwd,
			Capabilities:    &specs.LinuxCapabilities{},
			NoNewPrivileges: true,
		},
		Linux: &specs.Linux{
			UIDMappings:       []specs.LinuxIDMapping{{ContainerID: 0, HostID: in.UID, Size: 1}},
			GIDMappings:       []specs.LinuxIDMapping{{ContainerID: 0, HostID: in.GID, Size: 1}},
			Namespaces:        namespaces(plan.NetNS),
			Resources:         resources(p.GetLimits()),
			RootfsPropagation: "rprivate",
		},
	}
	if s.Mounts, err = mounts(s.Linux, plan.Mounts, in.Exists); err != nil {
		return nil, err
	}
	if s.Linux.Seccomp, err = Seccomp(plan.NetNS); err != nil {
		return nil, err
	}
	return s, nil
}

// inexpressible refuses the fields of a normalized policy that only
// sandboxd itself can enforce.
func inexpressible(p *sandboxdv1.Policy) error {
	switch {
	case p.GetFilesystem().GetRead() == sandboxdv1.Filesystem_LISTED:
		return &Refusal{Field: "filesystem.read", Reason: "LISTED has no mechanism in sandboxd either; use ALL with deny paths"}
	case p.GetNetwork().GetMode() == sandboxdv1.Network_ALLOWLIST:
		return &Refusal{Field: "network.allow", Reason: "the allowlist is enforced by the daemon's proxy, which an OCI runtime does not have; use network none or host"}
	case p.GetChildren().GetAllow():
		return &Refusal{Field: "children.allow", Reason: "child sandboxes are started through the daemon's session socket, which an OCI runtime does not have"}
	case p.GetLimits().GetTimeout() != nil:
		return &Refusal{Field: "limits.timeout", Reason: "OCI has no wall-clock limit; the daemon's timer kills the sandbox"}
	case p.GetLimits().GetOutputBytes() != 0:
		return &Refusal{Field: "limits.output_bytes", Reason: "the daemon counts and drops output, which an OCI runtime does not"}
	}
	return nil
}

// namespaces are the namespaces set's: all of them but time, the network
// one unless the policy shares the host's.
func namespaces(netns bool) []specs.LinuxNamespace {
	ns := []specs.LinuxNamespace{
		{Type: specs.PIDNamespace}, {Type: specs.IPCNamespace}, {Type: specs.UTSNamespace},
		{Type: specs.MountNamespace}, {Type: specs.UserNamespace}, {Type: specs.CgroupNamespace},
	}
	if netns {
		ns = append(ns, specs.LinuxNamespace{Type: specs.NetworkNamespace})
	}
	return ns
}

// resources are the cgroup limits sandboxd writes for l.
func resources(l *sandboxdv1.Limits) *specs.LinuxResources {
	var r specs.LinuxResources
	if m := l.GetMemoryBytes(); m != 0 {
		// Swap is memory and swap together: none beyond the limit, so a
		// hog is stopped at it rather than paged out.
		v := int64(m)
		r.Memory = &specs.LinuxMemory{Limit: &v, Swap: &v}
	}
	if n := l.GetPids(); n != 0 {
		v := int64(n)
		r.Pids = &specs.LinuxPids{Limit: &v}
	}
	if c := l.GetCpuMillis(); c != 0 {
		quota, period := launcherlinux.CPUQuota(c)
		q := int64(quota)
		r.CPU = &specs.LinuxCPU{Quota: &q, Period: &period}
	}
	if r.Memory == nil && r.Pids == nil && r.CPU == nil {
		return nil
	}
	return &r
}

// Mount options of what sandboxd mounts. Recursive ("r") attributes reach
// every mount beneath a bind, as sandboxd's mount_setattr(AT_RECURSIVE)
// does; a bind of a host path starts from the host's attributes, so each
// says nosuid and nodev again.
var (
	optsRoot      = []string{"rbind", "rro", "rnosuid", "rnodev"}
	optsWrite     = []string{"rbind", "rw", "rnosuid", "rnodev"}
	optsReadOnly  = []string{"rbind", "rro", "rnosuid", "rnodev"}
	optsPin       = []string{"rbind", "rnosuid", "rnodev"}
	optsMaskFile  = []string{"bind", "ro", "nosuid", "nodev", "noexec"}
	optsMaskDir   = []string{"ro", "nosuid", "nodev", "noexec", "mode=000", "size=4k"}
	optsEmptyDir  = []string{"ro", "nosuid", "nodev", "noexec", "mode=755", "size=4k"}
	optsProc      = []string{"nosuid", "nodev", "noexec"}
	optsDevpts    = []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}
	defaultDevs   = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"}
	runtimeLinks  = []string{"/dev/ptmx", "/dev/fd", "/dev/stdin", "/dev/stdout", "/dev/stderr"}
	maskFileSrc   = "/dev/null"
	errUnexpected = errors.New("a mount step the export does not know")
)

// mounts writes each of the plan's steps as the OCI mount that does the
// same, in the same order; optional steps (kernel files only some hosts
// have) become maskedPaths and readonlyPaths, which runtimes skip where
// missing.
func mounts(lx *specs.Linux, steps []sandboxinit.MountStep, exists func(string) (bool, bool)) ([]specs.Mount, error) {
	var out []specs.Mount
	// Placeholders are directories sandboxd makes on the host for a
	// carve-out or deny path that does not exist yet; the runtime makes
	// the mount point of the empty read-only directory that stands for
	// one (below) itself.
	placeholder := map[string]bool{}
	for _, st := range steps {
		bind := func(src string, opts []string) {
			out = append(out, specs.Mount{Destination: st.Target, Type: "bind", Source: src, Options: opts})
		}
		tmpfs := func(opts ...string) {
			out = append(out, specs.Mount{Destination: st.Target, Type: "tmpfs", Source: "tmpfs", Options: opts})
		}
		switch st.Kind {
		case sandboxinit.MountRootReadOnly:
			bind(st.Source, optsRoot)
		case sandboxinit.MountPlaceholder:
			placeholder[st.Source] = true
		case sandboxinit.MountBind:
			if st.Idmapped {
				return nil, fmt.Errorf("%s %s: %w", st.Kind, st.Target, errUnexpected)
			}
			bind(st.Source, optsWrite)
		case sandboxinit.MountFile:
			return nil, fmt.Errorf("%s %s: %w", st.Kind, st.Target, errUnexpected)
		case sandboxinit.MountProc:
			out = append(out, specs.Mount{Destination: st.Target, Type: "proc", Source: "proc", Options: optsProc})
		case sandboxinit.MountDevpts:
			out = append(out, specs.Mount{Destination: st.Target, Type: "devpts", Source: "devpts", Options: optsDevpts})
		case sandboxinit.MountDevice:
			// The runtime makes these in every container (runtime-spec
			// "Default Devices").
			if !slices.Contains(defaultDevs, st.Target) || st.Source != st.Target {
				return nil, fmt.Errorf("device %s: not one of the runtime's default devices: %w", st.Target, errUnexpected)
			}
		case sandboxinit.MountSymlink:
			// The runtime makes these too (runtime-spec "Dev symbolic links").
			if !slices.Contains(runtimeLinks, st.Target) {
				return nil, fmt.Errorf("symlink %s: not one the runtime makes: %w", st.Target, errUnexpected)
			}
		case sandboxinit.MountTmpfs:
			switch {
			case st.Optional:
				lx.MaskedPaths = append(lx.MaskedPaths, st.Target)
			case st.ReadOnly:
				tmpfs(optsMaskDir...)
			default:
				tmpfs("nosuid", "nodev", fmt.Sprintf("mode=%o", st.Mode))
			}
		case sandboxinit.MountMaskFile:
			if st.Optional {
				lx.MaskedPaths = append(lx.MaskedPaths, st.Target)
				continue
			}
			// nodev makes the device unopenable: the path can be neither
			// read nor written, as sandboxd's mode-0 empty file.
			bind(maskFileSrc, optsMaskFile)
		case sandboxinit.MountRebindReadOnly:
			switch {
			case st.Optional:
				lx.ReadonlyPaths = append(lx.ReadonlyPaths, st.Target)
			case placeholder[st.Target]:
				tmpfs(optsEmptyDir...)
			default:
				bind(st.Target, optsReadOnly)
			}
		case sandboxinit.MountPin:
			// A pin is a bind of the directory onto itself; an OCI mount
			// needs the host path, which the runtime would create only as
			// a plain, renamable directory.
			if ok, _ := exists(st.Target); !ok {
				return nil, &Refusal{Field: st.Field, Reason: fmt.Sprintf("%s, inside a write root on the way to a carve-out, a deny path or the daemon's own state or socket, does not exist: an OCI mount cannot keep it from being renamed; create it first", st.Target)}
			}
			bind(st.Target, optsPin)
		default:
			return nil, fmt.Errorf("%s %s: %w", st.Kind, st.Target, errUnexpected)
		}
	}
	if len(out) == 0 || out[0].Destination != "/" {
		return nil, errors.New("plan does not start with the root mount")
	}
	return out, nil
}

package launcherdarwin

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/launcher"
	"github.com/sandboxd/sandboxd/policy"
)

// PlanHost is what the planner is told of the host for one session.
type PlanHost struct {
	// TerminalPath is the path of a PTY session's terminal (its
	// replica), empty for a pipe session: only a PTY session may use a
	// terminal.
	TerminalPath string
	// Resolve returns the path the kernel reports for p: symlinks in the
	// existing part resolved (on macOS /tmp, /var and /etc lead to
	// /private). Seatbelt matches rules against that path, never against
	// the one a program passed. Nil resolves only those three.
	Resolve func(p string) string
}

// input is a request with what its host adds. Of the request, the planner
// reads the policy, the session id (which tags every deny of the profile,
// so a violation in the unified log names its session), the uid (for the
// report), the session socket (the one unix socket the sandbox may
// connect to under network NONE) and the daemon sockets it must not
// connect to even under network HOST.
type input struct {
	launcher.PlanRequest
	PlanHost
}

// Param is one -D KEY=VALUE of sandbox-exec, read in the profile with
// (param "KEY"). Paths travel as parameters, never inside the profile text,
// so no path can change the profile's meaning however it is spelled.
type Param struct {
	Key, Value string
}

// Plan is a policy made concrete for Seatbelt.
type Plan struct {
	// Profile is the SBPL text.
	Profile string
	// Params are the values the profile reads, in the order it names them.
	Params []Param
	// Report says per field what enforces it.
	Report []*sandboxdv1.FieldEnforcement
	// Tag is the message every deny of the profile carries.
	Tag string

	readAll bool
	// readable are the canonical roots a LISTED policy may read.
	readable []string
	// write, readOnly, deny, hidden and protect are canonical paths;
	// readOnly, deny, hidden and protect also hold the paths as spelled.
	write, readOnly, deny, hidden []string
	// protect is the daemon's own state (launcher.Spec.Protect), which no
	// grant reaches.
	protect []string
	// session is the session socket, as spelled and as resolved.
	session []string
}

// SystemReadRoots are what programs need to run under read LISTED: the
// system's binaries, libraries and data (the dyld shared cache is below
// /System), the configuration below /private/etc, the time zone database,
// /bin/sh's choice of shell (/private/var/select) and the command line
// tools the /usr/bin shims of git, make and cc run.
var SystemReadRoots = []string{
	"/Library/Apple",
	"/Library/Developer/CommandLineTools",
	"/System",
	"/bin",
	"/private/etc",
	"/private/var/db/dyld",
	"/private/var/db/timezone",
	"/private/var/db/xcode_select_link",
	"/private/var/select",
	"/sbin",
	"/usr",
}

// sysctlNames are the sysctls a sandbox may read: what the C runtime, the Go
// runtime and common interpreters ask about the machine and the OS. Process
// tables (kern.proc.*) and arguments (kern.procargs*) are not among them, so
// the sandbox cannot see the host's processes.
var sysctlNames = []string{
	"hw.activecpu", "hw.byteorder", "hw.cachelinesize", "hw.cpufamily", "hw.cputype",
	"hw.l1dcachesize", "hw.l2cachesize", "hw.logicalcpu", "hw.logicalcpu_max", "hw.machine",
	"hw.memsize", "hw.model", "hw.ncpu", "hw.nperflevels", "hw.pagesize", "hw.physicalcpu",
	"hw.physicalcpu_max", "kern.argmax", "kern.boottime", "kern.devname", "kern.hostname", "kern.maxfiles",
	"kern.maxfilesperproc", "kern.maxproc", "kern.ngroups", "kern.osproductversion",
	"kern.osrelease", "kern.ostype", "kern.osvariant_status", "kern.osversion",
	"kern.secure_kernel", "kern.usrstack64", "kern.version", "sysctl.proc_cputype",
	"vm.loadavg", "vm.pagesize",
}

var sysctlPrefixes = []string{"hw.optional.", "hw.perflevel", "machdep.cpu."}

// machServices are the system services a sandbox may look up: user and
// group lookups (getpwuid and friends go through opendirectoryd), logging,
// and notifications the C library posts.
var machServices = []string{
	"com.apple.logd",
	"com.apple.system.logger",
	"com.apple.system.notification_center",
	"com.apple.system.opendirectoryd.libinfo",
	"com.apple.system.opendirectoryd.membership",
}

// tlsMachServices verify certificates; only a sandbox with the network has
// a use for them.
var tlsMachServices = []string{"com.apple.SecurityServer", "com.apple.trustd.agent"}

var sessionIDPattern = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

// TagPrefix starts the message of every deny; the session id follows.
const TagPrefix = "sandboxd-session:"

// NewPlan plans the profile for req on host. It returns
// *launcher.Unenforceable when a field has no Seatbelt expression here.
func NewPlan(req launcher.PlanRequest, host PlanHost) (*Plan, error) {
	in := input{req, host}
	if err := refuseUnsupported(in.Policy); err != nil {
		return nil, err
	}
	if !sessionIDPattern.MatchString(in.SessionID) {
		return nil, fmt.Errorf("session id %q cannot tag a profile", in.SessionID)
	}
	hostResolve := in.Resolve
	if hostResolve == nil {
		hostResolve = resolvePrivate
	}
	// Each path is resolved once: a child's check and the profile must see
	// the same answer, or a link swapped in between the two would pass the
	// check and be granted.
	resolved := map[string]string{}
	resolve := func(p string) string {
		r, ok := resolved[p]
		if !ok {
			r = hostResolve(p)
			resolved[p] = r
		}
		return r
	}
	fs := in.Policy.GetFilesystem()
	if in.Child {
		if err := childGrantsUnmoved(fs, resolve); err != nil {
			return nil, err
		}
	}
	canon := func(paths []string) []string {
		out := make([]string, 0, len(paths))
		for _, p := range paths {
			out = append(out, resolve(filepath.Clean(p)))
		}
		return sortedUnique(out)
	}
	// A carve-out, a deny path or a hidden socket is subtracted as spelled
	// and as resolved: if its spelling goes through a symlink the sandbox
	// can replace, the spelled path is what it would be replaced by.
	both := func(paths []string) []string {
		out := canon(paths)
		for _, p := range paths {
			out = append(out, filepath.Clean(p))
		}
		return sortedUnique(out)
	}
	pl := &Plan{
		Tag:      TagPrefix + in.SessionID,
		readAll:  fs.GetRead() != sandboxdv1.Filesystem_LISTED,
		write:    canon(fs.GetWrite()),
		readOnly: both(fs.GetReadOnly()),
		deny:     both(fs.GetDeny()),
		hidden:   both(in.HideSockets),
		protect:  both(in.Protect),
	}
	if in.SessionSocket != "" {
		pl.session = both([]string{in.SessionSocket})
	}
	if !pl.readAll {
		pl.readable = sortedUnique(slices.Concat(SystemReadRoots, canon(fs.GetReadRoots()), pl.write))
	}
	b := &builder{tag: pl.Tag, seen: map[Param]string{}}
	b.build(in, pl)
	pl.Profile = strings.TrimRight(b.text.String(), "\n") + "\n"
	pl.Params = b.params
	pl.Report = report(in, pl)
	return pl, nil
}

// Args are sandbox-exec's arguments before the command: the profile and its
// parameters.
func (p *Plan) Args() []string {
	args := []string{"-p", p.Profile}
	for _, kv := range p.Params {
		args = append(args, "-D", kv.Key+"="+kv.Value)
	}
	return args
}

// Readable reports whether the profile lets the sandbox read (and execute)
// the file at the canonical path p.
func (p *Plan) Readable(path string) bool {
	if withinAny(path, p.deny) || withinAny(path, p.protect) {
		return false
	}
	return p.readAll || withinAny(path, p.readable)
}

// Classify names the policy field that refused a Seatbelt operation on
// target (a path, an address, a service name).
func (p *Plan) Classify(operation, target string) string {
	switch {
	case operation == "file-write-setugid":
		return "process"
	case strings.HasPrefix(operation, "file-") && withinAny(target, p.protect):
		return "process"
	case strings.HasPrefix(operation, "process-exec") && p.Readable(target):
		// Only a set-ID program is refused where it may be read.
		return "process"
	case strings.HasPrefix(operation, "file-read"), strings.HasPrefix(operation, "process-exec"):
		if withinAny(target, p.deny) {
			return "filesystem.deny"
		}
		return "filesystem.read"
	case operation == "file-ioctl":
		// Only devices take the ioctls a profile refuses: a terminal or
		// device that is not the session's.
		return "process"
	case strings.HasPrefix(operation, "file-"):
		switch {
		case withinAny(target, p.deny):
			return "filesystem.deny"
		case withinAny(target, p.readOnly):
			return "filesystem.read_only"
		}
		return "filesystem.write"
	case strings.HasPrefix(operation, "network") && withinAny(target, p.protect):
		// A socket in the daemon's state, refused whatever the network.
		return "process"
	case strings.HasPrefix(operation, "network") && withinAny(target, p.deny):
		return "filesystem.deny"
	case strings.HasPrefix(operation, "network"), operation == "system-socket":
		return "network.mode"
	}
	return "process"
}

// builder writes the profile and hands out parameter names.
type builder struct {
	tag    string
	text   strings.Builder
	params []Param
	seen   map[Param]string
}

// param returns the expression reading value, under a name made of prefix
// and a counter; the same value with the same prefix is one parameter.
func (b *builder) param(prefix, value string) string {
	key := Param{Key: prefix, Value: value}
	if name, ok := b.seen[key]; ok {
		return `(param "` + name + `")`
	}
	n := 0
	for _, p := range b.params {
		if strings.HasPrefix(p.Key, prefix+"_") {
			n++
		}
	}
	name := prefix + "_" + strconv.Itoa(n)
	b.seen[key] = name
	b.params = append(b.params, Param{Key: name, Value: value})
	return `(param "` + name + `")`
}

func (b *builder) line(format string, args ...any) {
	fmt.Fprintf(&b.text, format, args...)
	b.text.WriteByte('\n')
}

// rule writes (action operations filters...) with one filter per line.
func (b *builder) rule(action, operations string, filters []string) {
	if len(filters) == 0 {
		b.line("(%s %s)", action, operations)
		return
	}
	b.line("(%s %s", action, operations)
	for i, f := range filters {
		if i == len(filters)-1 {
			b.line("  %s)", f)
		} else {
			b.line("  %s", f)
		}
	}
}

func (b *builder) paths(kind, prefix string, paths []string) []string {
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		out = append(out, "("+kind+" "+b.param(prefix, p)+")")
	}
	return out
}

func quote(s string) string { return strconv.Quote(s) }

func (b *builder) build(in input, pl *Plan) {
	withMessage := "(with message " + quote(b.tag) + ")"
	b.line("(version 1)")
	b.line("")
	b.line("; Everything not allowed below is refused, and the refusal names the session.")
	b.line("(deny default %s)", withMessage)
	b.line("")

	b.line("; Processes: fork and exec; signals and process information only within this sandbox.")
	b.line("(allow process-fork)")
	b.line("(allow signal (target same-sandbox))")
	b.line("(allow process-info* (target same-sandbox))")
	var sysctls []string
	for _, n := range sysctlNames {
		sysctls = append(sysctls, "(sysctl-name "+quote(n)+")")
	}
	for _, n := range sysctlPrefixes {
		sysctls = append(sysctls, "(sysctl-name-prefix "+quote(n)+")")
	}
	b.rule("allow", "sysctl-read", sysctls)
	services := slices.Clone(machServices)
	if in.Policy.GetNetwork().GetMode() == sandboxdv1.Network_HOST {
		services = sortedUnique(append(services, tlsMachServices...))
	}
	var lookups []string
	for _, s := range services {
		lookups = append(lookups, "(global-name "+quote(s)+")")
	}
	b.rule("allow", "mach-lookup", lookups)
	b.line("(allow ipc-posix-sem)")
	b.line("")

	b.line("; Devices every program may use.")
	rw := []string{`(literal "/dev/null")`, `(literal "/dev/zero")`, `(subpath "/dev/fd")`, `(literal "/dev/stdin")`, `(literal "/dev/stdout")`, `(literal "/dev/stderr")`}
	ro := []string{`(literal "/dev/random")`, `(literal "/dev/urandom")`, `(literal "/dev/dtracehelper")`}
	b.rule("allow", "file-read* file-write-data file-ioctl", rw)
	b.rule("allow", "file-read*", ro)
	devices := slices.Concat([]string{`(literal "/dev")`}, rw, ro)
	if in.TerminalPath != "" {
		b.line("")
		b.line("; This PTY session's terminal.")
		tty := []string{"(literal " + b.param("TERMINAL", in.TerminalPath) + ")", `(literal "/dev/tty")`}
		b.rule("allow", "file-read* file-write-data file-ioctl", tty)
		devices = append(devices, tty...)
	}
	b.line("")

	if pl.readAll {
		b.line("; filesystem.read ALL: every path but the deny paths.")
		b.line("(allow file-read* process-exec)")
	} else {
		b.line("; filesystem.read LISTED: the system paths, the read roots and the write roots;")
		b.line("; the directories above them may be looked up, not listed.")
		var filters []string
		for _, r := range pl.readable {
			if slices.Contains(SystemReadRoots, r) {
				filters = append(filters, "(subpath "+quote(r)+")")
			} else {
				filters = append(filters, "(subpath "+b.param("READ", r)+")")
			}
		}
		b.rule("allow", "file-read* process-exec", filters)
		var above []string
		for _, a := range ancestors(pl.readable) {
			above = append(above, "(literal "+b.param("READ_ANCESTOR", a)+")")
		}
		// A path spelt through /etc, /tmp or /var reads the link on the
		// way to /private, as Apple's own profiles allow.
		b.rule("allow", "file-read-metadata", append([]string{`(literal "/")`, `(literal "/etc")`, `(literal "/tmp")`, `(literal "/var")`}, above...))
	}
	b.line("")

	if len(pl.write) > 0 {
		b.line("; filesystem.write: below the write roots.")
		b.rule("allow", "file-write*", b.paths("subpath", "WRITE", pl.write))
		b.line("")
	}

	switch in.Policy.GetNetwork().GetMode() {
	case sandboxdv1.Network_HOST:
		b.line("; network.mode HOST: the host's network, but not the daemon's sockets.")
		b.line("(allow network* system-socket)")
	default:
		b.line("; network.mode NONE: no socket may reach anything; socketpair still works.")
		b.line("(allow system-socket (socket-domain AF_UNIX))")
	}
	b.line("")

	// Every subtraction comes after every allow and is more specific than
	// the allow it subtracts from, so it wins whichever of the two Seatbelt
	// lets decide.
	b.line("; No other device, whatever the read and write roots say: not the host's")
	b.line("; terminals, console or packet filters.")
	deviceFilter := `(require-all (subpath "/dev")`
	for _, d := range devices {
		deviceFilter += " (require-not " + d + ")"
	}
	b.rule("deny", "file-read* file-write* file-ioctl", []string{deviceFilter + ")", withMessage})
	b.line("")
	b.line("; No set-user-ID or set-group-ID program runs, and no file is given those")
	b.line("; bits: what no_new_privs makes of them on Linux.")
	b.rule("deny", "process-exec", []string{"(file-mode #o4000)", "(file-mode #o2000)", withMessage})
	b.rule("deny", "file-write-setugid", []string{withMessage})
	b.line("")
	if len(pl.readOnly) > 0 {
		b.line("; filesystem.read_only: no write below a carve-out, existing or not.")
		b.rule("deny", "file-write*", append(b.paths("subpath", "READ_ONLY", pl.readOnly), withMessage))
		b.line("")
	}
	// Seatbelt checks a connect to a unix socket as network-outbound, not
	// as a file's use: under HOST, which allows network*, a socket below a
	// deny path (an agent's, a container engine's) is refused here.
	hostNetwork := in.Policy.GetNetwork().GetMode() == sandboxdv1.Network_HOST
	sockets := func(prefix string, paths []string) []string {
		var out []string
		for _, p := range paths {
			out = append(out, "(remote unix-socket (subpath "+b.param(prefix, p)+"))")
		}
		return append(out, withMessage)
	}
	if len(pl.deny) > 0 {
		b.line("; filesystem.deny: neither read, written nor executed.")
		b.rule("deny", "file-read* file-write* process-exec", append(b.paths("subpath", "DENY", pl.deny), withMessage))
		if hostNetwork {
			b.line("; Nor a socket below one connected to.")
			b.rule("deny", "network-outbound", sockets("DENY", pl.deny))
		}
		b.line("")
	}
	if len(pl.protect) > 0 {
		b.line("; The daemon's own state, whatever the policy grants: neither read, written nor executed.")
		b.rule("deny", "file-read* file-write* process-exec", append(b.paths("subpath", "DAEMON_STATE", pl.protect), withMessage))
		if hostNetwork {
			b.line("; Nor a socket in it connected to.")
			b.rule("deny", "network-outbound", sockets("DAEMON_STATE", pl.protect))
		}
		b.line("")
	}
	if protected := slices.Concat(pl.readOnly, pl.deny, pl.protect); len(protected) > 0 {
		b.line("; A carve-out, deny path or the daemon's state, and every directory above it, stays where it is:")
		b.line("; renamed away, it would no longer be below the path its rule names.")
		var filters []string
		for _, a := range ancestors(protected) {
			filters = append(filters, "(literal "+b.param("PROTECTED_ANCESTOR", a)+")")
		}
		b.rule("deny", "file-write-unlink", append(filters, withMessage))
		b.line("")
	}
	if len(pl.hidden) > 0 {
		b.line("; The daemon's sockets.")
		var filters []string
		for _, h := range pl.hidden {
			f := "(remote unix-socket (subpath " + b.param("DAEMON_SOCKET", h) + "))"
			// The session's own socket sits among the hidden ones; it is
			// left out of the deny rather than allowed over it.
			for _, own := range pl.session {
				if within(own, h) {
					f = "(require-all " + f + " (require-not (remote unix-socket (subpath " + b.param("SESSION_SOCKET", own) + "))))"
				}
			}
			filters = append(filters, f)
		}
		b.rule("deny", "network-outbound", append(filters, withMessage))
		b.line("")
	}
	if len(pl.session) > 0 {
		b.line("; children.allow: this session's own socket, and no other.")
		var filters []string
		for _, own := range pl.session {
			filters = append(filters, "(remote unix-socket (subpath "+b.param("SESSION_SOCKET", own)+"))")
		}
		b.rule("allow", "network-outbound", filters)
	}
}

// childGrantsUnmoved refuses a child's write root or read root that leads
// through a symlink other than the ones every Mac has. Narrowing checked
// the child's paths against its parent's as written, while Seatbelt grants
// where a link leads: a link the parent made in its write root would give
// the child what the parent never had.
func childGrantsUnmoved(fs *sandboxdv1.Filesystem, resolve func(string) string) error {
	for _, l := range []struct {
		field string
		paths []string
	}{
		{policy.FieldFilesystemWrite, fs.GetWrite()},
		{policy.FieldFilesystemReadRoots, fs.GetReadRoots()},
	} {
		for i, p := range l.paths {
			clean := filepath.Clean(p)
			if r := resolve(clean); r != resolvePrivate(clean) {
				return &policy.FieldError{Field: policy.Index(l.field, i), Msg: fmt.Sprintf("%q leads through a symlink to %q; a child's paths are checked against its parent's as written, so a child is given no path through a link: give the parent, and then the child, the real path", p, r)}
			}
		}
	}
	return nil
}

// resolvePrivate is the resolution every Mac shares: /tmp, /var and /etc
// are symlinks into /private.
func resolvePrivate(p string) string {
	for _, top := range []string{"/tmp", "/var", "/etc"} {
		if p == top || strings.HasPrefix(p, top+"/") {
			return "/private" + p
		}
	}
	return p
}

// ancestors returns the directories above paths, without "/", sorted.
func ancestors(paths []string) []string {
	var out []string
	for _, p := range paths {
		for d := filepath.Dir(p); d != "/" && d != "."; d = filepath.Dir(d) {
			out = append(out, d)
		}
	}
	return sortedUnique(out)
}

func sortedUnique(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}

// within reports whether p is root or below it, on whole components.
// within is policy's path algebra, with the rules of macOS paths.
var within = policy.Unix.Within

func withinAny(p string, roots []string) bool {
	return slices.ContainsFunc(roots, func(r string) bool { return within(p, r) })
}

// needs is what the backend needs of the daemon: nothing, as no sandbox
// here can be confined to the allowlist proxy.
var needs = launcher.Needs{}

// refuseUnsupported names the first field this backend has no mechanism
// for; running without it would be weaker than the policy asks.
func refuseUnsupported(p *sandboxdv1.Policy) error {
	if u := needs.Refusal(p); u != nil {
		return u
	}
	l := p.GetLimits()
	switch {
	case l.GetMemoryBytes() != 0:
		return &launcher.Unenforceable{Field: "limits.memory_bytes", Mechanism: "a per-sandbox memory limit", Found: "macOS has no cgroups and does not enforce RLIMIT_AS", Remedy: "drop limits.memory_bytes from the policy"}
	case l.GetPids() != 0:
		return &launcher.Unenforceable{Field: "limits.pids", Mechanism: "a per-sandbox process limit", Found: "macOS has no cgroups; RLIMIT_NPROC counts every process of the user, not of the sandbox", Remedy: "drop limits.pids from the policy"}
	case l.GetCpuMillis() != 0:
		return &launcher.Unenforceable{Field: "limits.cpu_millis", Mechanism: "a per-sandbox CPU bandwidth limit", Found: "macOS has no cgroups", Remedy: "drop limits.cpu_millis from the policy"}
	case l.GetTimeout() != nil:
		// The timeout promises that the sandbox ends then; a process that
		// escaped the snapshots would run on, confined by the profile but
		// unbounded in time.
		return &launcher.Unenforceable{
			Field:     "limits.timeout",
			Mechanism: "killing every process of the sandbox at the timeout",
			Found:     "macOS has no pid namespace or process tag the sandbox cannot leave: the daemon finds a session's processes by process group and parentage in snapshots of the process table every 100 ms, and a process that forks, calls setsid and loses its parent between two snapshots is not found",
			Remedy:    "drop limits.timeout from the policy and end the session from the caller (sandboxctl kill), knowing such a process outlives it too",
		}
	}
	return nil
}

package launcherdarwin

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/internal/golden"
	"github.com/sandboxd/sandboxd/launcher"
	"github.com/sandboxd/sandboxd/policy"
)

const testSession = "0123456789abcdef"

// testResolve stands for a Mac's filesystem: the /private symlinks, and a
// workspace whose .git is a symlink to a directory beside it.
func testResolve(p string) string {
	p = resolvePrivate(p)
	const link, target = "/Users/dev/linked/.git", "/Users/dev/gitdirs/linked"
	if p == link || strings.HasPrefix(p, link+"/") {
		return target + strings.TrimPrefix(p, link)
	}
	return p
}

func normalized(t *testing.T, p *sandboxdv1.Policy) *sandboxdv1.Policy {
	t.Helper()
	if err := policy.Validate(p); err != nil {
		t.Fatalf("test policy is invalid: %v", err)
	}
	return policy.Normalize(p)
}

// plan plans req on a Mac where a PTY session's terminal is
// /dev/ttys004.
func plan(t *testing.T, req launcher.PlanRequest) *Plan {
	t.Helper()
	if req.SessionID == "" {
		req.SessionID = testSession
	}
	if req.UID == 0 {
		req.UID = 501
	}
	host := PlanHost{Resolve: testResolve}
	if req.Terminal {
		host.TerminalPath = "/dev/ttys004"
	}
	pl, err := NewPlan(req, host)
	if err != nil {
		t.Fatalf("NewPlan: %v", err)
	}
	return pl
}

type goldenCase struct {
	name string
	in   launcher.PlanRequest
}

func goldenCases(t *testing.T) []goldenCase {
	var cases []goldenCase
	for _, name := range policy.PresetNames() {
		p, err := policy.Preset(name, "/Users/dev/project")
		if err != nil {
			t.Fatal(err)
		}
		cases = append(cases, goldenCase{"preset-" + name, launcher.PlanRequest{Policy: p}})
	}
	return append(cases,
		goldenCase{"nested-carve-outs-and-deny-in-write-root", launcher.PlanRequest{Policy: normalized(t, &sandboxdv1.Policy{
			Filesystem: &sandboxdv1.Filesystem{
				Write:    []string{"/Users/dev/project", "/tmp/scratch"},
				ReadOnly: []string{"/Users/dev/project/.git", "/Users/dev/project/repo/sub/.git", "/Users/dev/project/.env"},
				Deny:     []string{"/Users/dev/.ssh", "/Users/dev/project/config/secrets.json"},
			},
		})}},
		goldenCase{"carve-out-through-symlink", launcher.PlanRequest{Policy: normalized(t, &sandboxdv1.Policy{
			Filesystem: &sandboxdv1.Filesystem{
				Write:    []string{"/Users/dev/linked"},
				ReadOnly: []string{"/Users/dev/linked/.git"},
			},
		})}},
		goldenCase{"read-listed", launcher.PlanRequest{Policy: normalized(t, &sandboxdv1.Policy{
			Filesystem: &sandboxdv1.Filesystem{
				Read:      sandboxdv1.Filesystem_LISTED,
				ReadRoots: []string{"/opt/homebrew", "/Users/dev/docs"},
				Write:     []string{"/var/folders/xy/abc/T/work"},
				Deny:      []string{"/opt/homebrew/etc/secrets"},
			},
		})}},
		goldenCase{"network-host-hidden-sockets", launcher.PlanRequest{
			Policy:      normalized(t, &sandboxdv1.Policy{Network: &sandboxdv1.Network{Mode: sandboxdv1.Network_HOST}}),
			HideSockets: []string{"/var/run/sandboxd/sandboxd.sock", "/var/run/sandboxd/sandboxd-sessions"},
		}},
		// A user daemon's state in the home the policy grants.
		goldenCase{"write-home-daemon-state", launcher.PlanRequest{
			Policy:      normalized(t, &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{"/Users/dev"}}}),
			HideSockets: []string{"/Users/dev/.sandboxd/sandboxd.sock"},
			Protect:     []string{"/Users/dev/Library/Application Support/sandboxd"},
		}},
		goldenCase{"children-network-none", launcher.PlanRequest{
			Policy:        normalized(t, &sandboxdv1.Policy{Children: &sandboxdv1.Children{Allow: true}}),
			SessionSocket: "/var/run/sandboxd/sandboxd-sessions/" + testSession + ".sock",
			HideSockets:   []string{"/var/run/sandboxd/sandboxd.sock", "/var/run/sandboxd/sandboxd-sessions"},
		}},
		goldenCase{"children-network-host-pty", launcher.PlanRequest{
			Policy: normalized(t, &sandboxdv1.Policy{
				Network:  &sandboxdv1.Network{Mode: sandboxdv1.Network_HOST},
				Children: &sandboxdv1.Children{Allow: true},
			}),
			Terminal:      true,
			SessionSocket: "/var/run/sandboxd/sandboxd-sessions/" + testSession + ".sock",
			HideSockets:   []string{"/var/run/sandboxd/sandboxd.sock", "/var/run/sandboxd/sandboxd-sessions"},
		}},
	)
}

// TestGoldenProfiles pins the profile and parameters of every preset and of
// the tricky policies; go test -update rewrites them after a deliberate
// change, which the diff then shows.
func TestGoldenProfiles(t *testing.T) {
	for _, c := range goldenCases(t) {
		t.Run(c.name, func(t *testing.T) {
			pl := plan(t, c.in)
			var b strings.Builder
			b.WriteString(pl.Profile)
			b.WriteString("\n;; sandbox-exec parameters:\n")
			for _, kv := range pl.Params {
				b.WriteString(";; -D " + kv.Key + "=" + kv.Value + "\n")
			}
			golden.Check(t, c.name+".sb", []byte(b.String()))
			checkStructure(t, c.in, pl)
		})
	}
}

// checkStructure holds for every profile: it parses; it starts with the
// version and a default deny tagged with the session; every deny names the
// session; every parameter read is passed and every one passed is read;
// terminal rules exist exactly for PTY sessions.
func checkStructure(t *testing.T, in launcher.PlanRequest, pl *Plan) {
	t.Helper()
	forms, err := parseSBPL(pl.Profile)
	if err != nil {
		t.Fatalf("profile does not parse: %v", err)
	}
	if len(forms) < 2 || forms[0].String() != "(version 1)" {
		t.Fatalf("profile does not start with (version 1): %v", forms[:min(len(forms), 1)])
	}
	tag := `(with message "` + TagPrefix + testSession + `")`
	if got := forms[1].String(); got != "(deny default "+tag+")" {
		t.Errorf("second form is %s, want the tagged default deny", got)
	}
	read := map[string]bool{}
	var walk func(n node)
	walk = func(n node) {
		if n.head() == "param" {
			read[n.list[1].atom] = true
		}
		for _, c := range n.list {
			walk(c)
		}
	}
	for _, f := range forms {
		walk(f)
		if f.head() == "deny" && !strings.Contains(f.String(), tag) {
			t.Errorf("deny without the session's tag: %s", f)
		}
	}
	for _, kv := range pl.Params {
		if !read[kv.Key] {
			t.Errorf("parameter %s is passed but never read", kv.Key)
		}
		delete(read, kv.Key)
	}
	for k := range read {
		t.Errorf("parameter %s is read but not passed", k)
	}
	hasTTY := strings.Contains(pl.Profile, "/dev/tty") || slices.ContainsFunc(pl.Params, func(p Param) bool { return strings.HasPrefix(p.Key, "TERMINAL") })
	if hasTTY != in.Terminal {
		t.Errorf("terminal rules present: %v; PTY session: %v", hasTTY, in.Terminal)
	}
	args := pl.Args()
	if args[0] != "-p" || args[1] != pl.Profile || len(args) != 2+2*len(pl.Params) {
		t.Errorf("Args = %q", args)
	}
}

type expect struct {
	q       query
	allowed bool
}

func checkQueries(t *testing.T, pl *Plan, cases []expect) {
	t.Helper()
	m := newProfileModel(t, pl)
	for _, c := range cases {
		if got := m.allowed(t, c.q); got != c.allowed {
			t.Errorf("%v: allowed = %v, want %v", c.q, got, c.allowed)
		}
	}
}

func fileQ(op, path string) query    { return query{op: op, path: path} }
func unixQ(path string) query        { return query{op: "network-outbound", path: path} }
func inetQ(op, addr string) query    { return query{op: op, addr: addr} }
func allowQ(q query) expect          { return expect{q, true} }
func denyQ(q query) expect           { return expect{q, false} }
func writeQ(path string) query       { return fileQ("file-write-create", path) }
func readQ(path string) query        { return fileQ("file-read-data", path) }
func unlinkQ(path string) query      { return fileQ("file-write-unlink", path) }
func metadataQ(path string) query    { return fileQ("file-read-metadata", path) }
func execQ(path string) query        { return fileQ("process-exec", path) }
func dataQ(path string) query        { return fileQ("file-write-data", path) }
func ioctlQ(path string) query       { return fileQ("file-ioctl", path) }
func socketQ(domain string) query    { return query{op: "system-socket", addr: domain} }
func outboundQ(addr string) query    { return inetQ("network-outbound", addr) }
func inboundQ(addr string) query     { return inetQ("network-inbound", addr) }
func bindQ(addr string) query        { return inetQ("network-bind", addr) }
func tcpHost(addr string) expect     { return allowQ(outboundQ(addr)) }
func tcpRefused(addr string) expect  { return denyQ(outboundQ(addr)) }
func writable(path string) expect    { return allowQ(writeQ(path)) }
func notWritable(path string) expect { return denyQ(writeQ(path)) }

// The conformance cases' filesystem rules, decided by the profile itself.
func TestProfileFilesystemSemantics(t *testing.T) {
	const w = "/private/var/tmp/sbd/w"
	pl := plan(t, launcher.PlanRequest{Policy: normalized(t, &sandboxdv1.Policy{
		Filesystem: &sandboxdv1.Filesystem{
			// Spelled through /var: Seatbelt only ever sees /private/var.
			Write:    []string{"/var/tmp/sbd/w"},
			ReadOnly: []string{"/var/tmp/sbd/w/.git", "/var/tmp/sbd/w/repo/sub/.git", "/var/tmp/sbd/w/.env"},
			Deny:     []string{"/var/tmp/sbd/w/creds", "/var/tmp/sbd/data/secret"},
		},
	})})
	checkQueries(t, pl, []expect{
		writable(w + "/new"),
		allowQ(dataQ(w + "/existing")),
		writable(w + "/dir/nested"),
		allowQ(unlinkQ(w + "/renamed")),
		notWritable("/private/var/tmp/sbd/outside/new"),
		notWritable("/private/var/tmp/sbd/w-beside"),
		denyQ(unlinkQ("/private/var/tmp/sbd/outside/file")),
		// Carve-outs, existing or not.
		denyQ(dataQ(w + "/.git/config")),
		notWritable(w + "/.git/new"),
		notWritable(w + "/.git"),
		notWritable(w + "/.env"),
		denyQ(unlinkQ(w + "/.git")),
		allowQ(writeQ(w + "/beside-carve-out")),
		// Neither the carve-out nor a directory above it moves away.
		denyQ(unlinkQ(w + "/repo")),
		denyQ(unlinkQ(w + "/repo/sub")),
		denyQ(unlinkQ(w + "/repo/sub/.git")),
		allowQ(unlinkQ(w + "/repo/other")),
		// Deny paths: no read, write, exec, rename, inside write roots or not.
		denyQ(readQ(w + "/creds/token")),
		notWritable(w + "/creds/new"),
		denyQ(unlinkQ(w + "/creds")),
		denyQ(execQ(w + "/creds/helper")),
		denyQ(readQ("/private/var/tmp/sbd/data/secret")),
		denyQ(metadataQ("/private/var/tmp/sbd/data/secret")),
		allowQ(readQ("/private/var/tmp/sbd/data/other")),
		denyQ(unlinkQ("/private/var/tmp/sbd/data")),
		// Read ALL: everything else is readable and executable.
		allowQ(readQ("/Users/dev/anything")),
		allowQ(execQ("/usr/bin/true")),
		// The devices every program uses, not the others.
		allowQ(dataQ("/dev/null")),
		denyQ(dataQ("/dev/ttys001")),
		denyQ(dataQ("/dev/tty")),
		allowQ(readQ("/dev/fd/3")),
		allowQ(readQ("/dev/urandom")),
		denyQ(dataQ("/dev/urandom")),
		denyQ(readQ("/dev/console")),
		denyQ(readQ("/dev/bpf0")),
		// No network under NONE, no host unix socket.
		tcpRefused("127.0.0.1:8080"),
		denyQ(unixQ("/private/var/run/mDNSResponder")),
		allowQ(socketQ("AF_UNIX")),
	})
}

// Linux runs every sandbox with no_new_privs; here no set-user-ID or
// set-group-ID program may run, and no file may be given those bits, read
// ALL or LISTED, inside write roots or not.
func TestProfileRefusesSetID(t *testing.T) {
	const w = "/private/var/tmp/sbd/w"
	setuid := func(op, path string) query { return query{op: op, path: path, mode: 0o104755} }
	setgid := func(op, path string) query { return query{op: op, path: path, mode: 0o102755} }
	for _, read := range []sandboxdv1.Filesystem_Read{sandboxdv1.Filesystem_ALL, sandboxdv1.Filesystem_LISTED} {
		pl := plan(t, launcher.PlanRequest{Policy: normalized(t, &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Read: read, Write: []string{w}}})})
		checkQueries(t, pl, []expect{
			denyQ(setuid("process-exec", "/usr/bin/sudo")),
			denyQ(setgid("process-exec", "/usr/bin/wall")),
			denyQ(setuid("process-exec", w+"/planted")),
			allowQ(query{op: "process-exec", path: "/usr/bin/true", mode: 0o100755}),
			allowQ(query{op: "process-exec", path: w + "/built", mode: 0o100755}),
			denyQ(fileQ("file-write-setugid", w+"/planted")),
			denyQ(fileQ("file-write-setugid", "/private/var/tmp/sbd/outside")),
			allowQ(fileQ("file-write-mode", w+"/built")),
		})
	}
}

func TestProfileCarveOutThroughSymlink(t *testing.T) {
	pl := plan(t, launcher.PlanRequest{Policy: normalized(t, &sandboxdv1.Policy{
		Filesystem: &sandboxdv1.Filesystem{Write: []string{"/Users/dev/linked"}, ReadOnly: []string{"/Users/dev/linked/.git"}},
	})})
	checkQueries(t, pl, []expect{
		// Where the symlink leads today.
		notWritable("/Users/dev/gitdirs/linked/config"),
		// And where it would lead once the sandbox replaced the symlink
		// by a directory of its own.
		notWritable("/Users/dev/linked/.git/config"),
		denyQ(unlinkQ("/Users/dev/linked/.git")),
		writable("/Users/dev/linked/src.go"),
	})
}

// TestChildGrantThroughSymlinkIsRefused: a parent that may write
// /Users/dev/proj makes /Users/dev/proj/l a link to /Users/dev and asks
// for a child writing /Users/dev/proj/l. Narrowing passes it, as written;
// Seatbelt would grant where the link leads.
func TestChildGrantThroughSymlinkIsRefused(t *testing.T) {
	resolve := func(p string) string {
		p = resolvePrivate(p)
		if rest, ok := strings.CutPrefix(p, "/Users/dev/proj/l"); ok && (rest == "" || rest[0] == '/') {
			return "/Users/dev" + rest
		}
		return p
	}
	writer := normalized(t, &sandboxdv1.Policy{
		Filesystem: &sandboxdv1.Filesystem{Write: []string{"/Users/dev/proj"}},
		Children:   &sandboxdv1.Children{Allow: true},
	})
	reader := normalized(t, &sandboxdv1.Policy{
		Filesystem: &sandboxdv1.Filesystem{Read: sandboxdv1.Filesystem_LISTED, ReadRoots: []string{"/Users/dev/proj"}},
		Children:   &sandboxdv1.Children{Allow: true},
	})
	for _, c := range []struct {
		field  string
		parent *sandboxdv1.Policy
		fs     *sandboxdv1.Filesystem
	}{
		{"filesystem.write[0]", writer, &sandboxdv1.Filesystem{Write: []string{"/Users/dev/proj/l"}}},
		{"filesystem.write[0]", writer, &sandboxdv1.Filesystem{Write: []string{"/Users/dev/proj/l/x"}}},
		{"filesystem.read_roots[0]", reader, &sandboxdv1.Filesystem{Read: sandboxdv1.Filesystem_LISTED, ReadRoots: []string{"/Users/dev/proj/l"}}},
	} {
		child, err := policy.Narrow(c.parent, &sandboxdv1.Policy{Filesystem: c.fs})
		if err != nil {
			t.Fatalf("%v: narrowing: %v", c.fs, err)
		}
		_, err = NewPlan(launcher.PlanRequest{Policy: child, Child: true, SessionID: testSession, UID: 501}, PlanHost{Resolve: resolve})
		var fe *policy.FieldError
		if !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("%v: NewPlan of the child: %v, want a refusal of %s", c.fs, err, c.field)
		}
	}
	// A link swapped in after the check's look: the profile must use what
	// the check saw.
	looks := map[string]int{}
	swapping := func(p string) string {
		looks[p]++
		if looks[p] > 1 {
			return resolve(strings.Replace(p, "/Users/dev/proj/s", "/Users/dev/proj/l", 1))
		}
		return resolvePrivate(p)
	}
	child, err := policy.Narrow(writer, &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{"/Users/dev/proj/s"}}})
	if err != nil {
		t.Fatal(err)
	}
	if pl, err := NewPlan(launcher.PlanRequest{Policy: child, Child: true, SessionID: testSession, UID: 501}, PlanHost{Resolve: swapping}); err == nil && slices.Contains(pl.write, "/Users/dev") {
		t.Errorf("a link swapped in after the child's check was granted: write %v", pl.write)
	}
	// The same paths without the link, and /tmp, which every Mac links.
	for _, w := range []string{"/Users/dev/proj/src", "/tmp/w"} {
		p := &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{w}}}
		if _, err := NewPlan(launcher.PlanRequest{Policy: normalized(t, p), Child: true, SessionID: testSession, UID: 501}, PlanHost{Resolve: resolve}); err != nil {
			t.Errorf("child writing %s: %v", w, err)
		}
	}
}

func TestProfileReadListed(t *testing.T) {
	pl := plan(t, launcher.PlanRequest{Policy: normalized(t, &sandboxdv1.Policy{
		Filesystem: &sandboxdv1.Filesystem{
			Read:      sandboxdv1.Filesystem_LISTED,
			ReadRoots: []string{"/opt/tools", "/Users/dev/docs"},
			Write:     []string{"/tmp/work"},
			Deny:      []string{"/opt/tools/etc/secrets"},
		},
	})})
	checkQueries(t, pl, []expect{
		allowQ(readQ("/usr/lib/libSystem.B.dylib")),
		allowQ(execQ("/bin/sh")),
		allowQ(readQ("/private/etc/hosts")),
		allowQ(readQ("/System/Volumes/Preboot/Cryptexes/OS/System/Library/dyld/dyld_shared_cache_arm64e")),
		allowQ(readQ("/opt/tools/bin/tool")),
		allowQ(execQ("/opt/tools/bin/tool")),
		allowQ(readQ("/Users/dev/docs/a.md")),
		allowQ(readQ("/private/tmp/work/file")),
		writable("/private/tmp/work/file"),
		denyQ(readQ("/opt/tools/etc/secrets/key")),
		denyQ(readQ("/Users/dev/.ssh/id_ed25519")),
		denyQ(execQ("/Users/dev/bin/tool")),
		denyQ(readQ("/Users/dev/docs-private/x")),
		// The directories above a read root can be looked up, not listed.
		allowQ(metadataQ("/")),
		allowQ(metadataQ("/Users/dev")),
		allowQ(metadataQ("/Users")),
		// The links every Mac has, looked up on the way to /private.
		allowQ(metadataQ("/etc")),
		allowQ(metadataQ("/tmp")),
		allowQ(metadataQ("/var")),
		denyQ(readQ("/Users/dev")),
		denyQ(metadataQ("/Users/other")),
	})
	if !pl.Readable("/opt/tools/bin/tool") || pl.Readable("/Users/dev/bin/tool") || pl.Readable("/opt/tools/etc/secrets/key") {
		t.Errorf("Readable disagrees with the profile")
	}
}

func TestProfileNetwork(t *testing.T) {
	const dir = "/private/var/run/sandboxd/sandboxd-sessions"
	const daemon = "/private/var/run/sandboxd/sandboxd.sock"
	own := dir + "/" + testSession + ".sock"
	// The daemon spells its sockets as it was configured, through /var.
	hide := []string{strings.TrimPrefix(daemon, "/private"), strings.TrimPrefix(dir, "/private")}
	spelledOwn := strings.TrimPrefix(own, "/private")
	t.Run("host", func(t *testing.T) {
		pl := plan(t, launcher.PlanRequest{Policy: normalized(t, &sandboxdv1.Policy{Network: &sandboxdv1.Network{Mode: sandboxdv1.Network_HOST}}), HideSockets: hide})
		checkQueries(t, pl, []expect{
			tcpHost("93.184.216.34:443"),
			allowQ(inboundQ("127.0.0.1:8080")),
			allowQ(bindQ("127.0.0.1:0")),
			allowQ(socketQ("AF_INET")),
			allowQ(unixQ("/private/var/run/mDNSResponder")),
			denyQ(unixQ(daemon)),
			denyQ(unixQ(dir + "/other.sock")),
			denyQ(unixQ(own)),
		})
	})
	t.Run("host with deny paths", func(t *testing.T) {
		pl := plan(t, launcher.PlanRequest{Policy: normalized(t, &sandboxdv1.Policy{
			Network:    &sandboxdv1.Network{Mode: sandboxdv1.Network_HOST},
			Filesystem: &sandboxdv1.Filesystem{Deny: []string{"/Users/dev/.gnupg", "/tmp/agent"}},
		}), HideSockets: hide, Protect: []string{"/var/lib/sandboxd"}})
		checkQueries(t, pl, []expect{
			denyQ(unixQ("/Users/dev/.gnupg/S.gpg-agent")),
			denyQ(unixQ("/private/tmp/agent/sock")),
			denyQ(unixQ("/private/var/lib/sandboxd/x.sock")),
			allowQ(unixQ("/Users/dev/.docker/run/docker.sock")),
			tcpHost("93.184.216.34:443"),
		})
	})
	t.Run("host with children", func(t *testing.T) {
		pl := plan(t, launcher.PlanRequest{Policy: normalized(t, &sandboxdv1.Policy{
			Network:  &sandboxdv1.Network{Mode: sandboxdv1.Network_HOST},
			Children: &sandboxdv1.Children{Allow: true},
		}), HideSockets: hide, SessionSocket: spelledOwn})
		checkQueries(t, pl, []expect{
			tcpHost("93.184.216.34:443"),
			allowQ(unixQ(own)),
			denyQ(unixQ(daemon)),
			denyQ(unixQ(dir + "/other.sock")),
		})
	})
	t.Run("none with children", func(t *testing.T) {
		pl := plan(t, launcher.PlanRequest{Policy: normalized(t, &sandboxdv1.Policy{Children: &sandboxdv1.Children{Allow: true}}), HideSockets: hide, SessionSocket: spelledOwn})
		checkQueries(t, pl, []expect{
			allowQ(unixQ(own)),
			denyQ(unixQ(daemon)),
			denyQ(unixQ(dir + "/other.sock")),
			denyQ(unixQ("/private/tmp/.X11-unix/X0")),
			tcpRefused("127.0.0.1:8080"),
			denyQ(bindQ("127.0.0.1:0")),
			denyQ(socketQ("AF_INET")),
		})
	})
}

func TestProfileTerminal(t *testing.T) {
	pl := plan(t, launcher.PlanRequest{Policy: policy.Default(), Terminal: true})
	checkQueries(t, pl, []expect{
		allowQ(dataQ("/dev/ttys004")),
		allowQ(ioctlQ("/dev/ttys004")),
		allowQ(readQ("/dev/tty")),
		denyQ(readQ("/dev/ttys005")),
		denyQ(dataQ("/dev/ttys005")),
		denyQ(ioctlQ("/dev/ttys005")),
	})
	// Not even a policy that may write everything reaches another terminal.
	full, err := policy.Preset("full-access", "")
	if err != nil {
		t.Fatal(err)
	}
	checkQueries(t, plan(t, launcher.PlanRequest{Policy: full, Terminal: true}), []expect{
		writable("/Users/dev/anything"),
		allowQ(dataQ("/dev/ttys004")),
		denyQ(readQ("/dev/ttys005")),
		denyQ(dataQ("/dev/ttys005")),
		denyQ(dataQ("/dev/disk0")),
		allowQ(dataQ("/dev/null")),
		allowQ(metadataQ("/dev")),
	})
	checkQueries(t, plan(t, launcher.PlanRequest{Policy: policy.Default()}), []expect{
		denyQ(ioctlQ("/dev/ttys004")),
		denyQ(ioctlQ("/dev/tty")),
	})
}

func TestClassify(t *testing.T) {
	pl := plan(t, launcher.PlanRequest{Policy: normalized(t, &sandboxdv1.Policy{
		Filesystem: &sandboxdv1.Filesystem{
			Write:    []string{"/tmp/w"},
			ReadOnly: []string{"/tmp/w/.git"},
			Deny:     []string{"/tmp/w/creds", "/Users/dev/.ssh"},
		},
	})})
	for _, c := range []struct{ op, target, want string }{
		{"file-write-create", "/private/tmp/outside", "filesystem.write"},
		{"file-write-data", "/private/tmp/w/.git/config", "filesystem.read_only"},
		{"file-write-unlink", "/tmp/w/.git", "filesystem.read_only"},
		{"file-write-create", "/private/tmp/w/creds/x", "filesystem.deny"},
		{"file-read-data", "/Users/dev/.ssh/id_rsa", "filesystem.deny"},
		{"file-read-data", "/Users/dev/other", "filesystem.read"},
		{"process-exec", "/private/tmp/w/creds/tool", "filesystem.deny"},
		// Readable, so refused for its set-ID bits.
		{"process-exec", "/usr/bin/sudo", "process"},
		{"file-write-setugid", "/private/tmp/w/tool", "process"},
		{"network-outbound", "93.184.216.34:443", "network.mode"},
		{"network-outbound", "/private/var/run/sandboxd/sandboxd.sock", "network.mode"},
		// A socket below a deny path, refused under any network mode.
		{"network-outbound", "/Users/dev/.ssh/agent.sock", "filesystem.deny"},
		{"system-socket", "", "network.mode"},
		{"signal", "", "process"},
		{"file-ioctl", "/dev/ttys005", "process"},
		{"mach-lookup", "com.apple.coreservicesd", "process"},
	} {
		if got := pl.Classify(c.op, c.target); got != c.want {
			t.Errorf("Classify(%q, %q) = %q, want %q", c.op, c.target, got, c.want)
		}
	}
}

func TestUnexpressibleFieldsAreRefused(t *testing.T) {
	for _, c := range []struct {
		field  string
		policy *sandboxdv1.Policy
	}{
		{"network.allow", &sandboxdv1.Policy{Network: &sandboxdv1.Network{Mode: sandboxdv1.Network_ALLOWLIST, Allow: []*sandboxdv1.NetworkAllow{{Host: "example.com", Port: 443}}}}},
		{"limits.memory_bytes", &sandboxdv1.Policy{Limits: &sandboxdv1.Limits{MemoryBytes: 1 << 30}}},
		{"limits.pids", &sandboxdv1.Policy{Limits: &sandboxdv1.Limits{Pids: 64}}},
		{"limits.cpu_millis", &sandboxdv1.Policy{Limits: &sandboxdv1.Limits{CpuMillis: 500}}},
		// Ending a sandbox at its timeout needs every process of it found,
		// and one that does fork, setsid, fork and exit between two
		// snapshots of the process table is not.
		{"limits.timeout", &sandboxdv1.Policy{Limits: &sandboxdv1.Limits{Timeout: durationpb.New(time.Minute)}}},
	} {
		_, err := NewPlan(launcher.PlanRequest{Policy: normalized(t, c.policy), SessionID: testSession}, PlanHost{})
		var u *launcher.Unenforceable
		if !errors.As(err, &u) || u.Field != c.field || u.Remedy == "" {
			t.Errorf("%s: NewPlan error %v, want an Unenforceable for the field with a remedy", c.field, err)
		}
	}
	if _, err := NewPlan(launcher.PlanRequest{Policy: policy.Default(), SessionID: `x") (allow default`}, PlanHost{}); err == nil {
		t.Errorf("a session id that is not a plain token was accepted into the profile")
	}
}

func TestReport(t *testing.T) {
	pl := plan(t, launcher.PlanRequest{
		Policy:        normalized(t, &sandboxdv1.Policy{Children: &sandboxdv1.Children{Allow: true}, Filesystem: &sandboxdv1.Filesystem{Write: []string{"/tmp/w"}, ReadOnly: []string{"/tmp/w/.git"}}}),
		SessionSocket: "/private/var/run/sandboxd/sandboxd-sessions/" + testSession + ".sock",
	})
	fields := map[string]string{}
	for _, f := range pl.Report {
		fields[f.GetField()] = f.GetMechanism()
	}
	for _, want := range []string{"filesystem.read", "filesystem.write", "filesystem.read_only", "filesystem.deny", "network.mode", "process", "children.allow"} {
		if fields[want] == "" {
			t.Errorf("report has no mechanism for %s: %v", want, fields)
		}
	}
	if !strings.Contains(fields["process"], "uid 501") || fields["filesystem.deny"] != "none requested" {
		t.Errorf("report: %v", fields)
	}
	// The report must not claim what the snapshots cannot promise.
	if p := fields["process"]; !strings.Contains(p, "100 ms") || !strings.Contains(p, "outlive") {
		t.Errorf("process: %q does not say that a process can outlive the session", p)
	}
}

package launcherlinux

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/launcher"
	"github.com/sandboxd/sandboxd/policy"
	"golang.org/x/sys/unix"
)

// sessionPlan is a session's Plan with what the applier needs beside it of
// this host, all decided from the request once: Start reads nothing of the
// policy but this.
type sessionPlan struct {
	*Plan
	// mapped are the write roots the daemon ID-maps, keys how, and notes
	// what a refusal of each write root considered should say (idmapPlan).
	mapped []string
	keys   map[string]idmapKey
	notes  map[string]rootNote
	// layers are the policy's layered paths.
	layers []string
	// carveOuts are the read-only and deny paths, each of which may rest
	// on a placeholder.
	carveOuts []string
	limits    *sandboxdv1.Limits
	// privateTmp: no write root covers /tmp, so the sandbox has its own.
	privateTmp bool
	// shared are the daemon's files of the plan's Shared steps, by
	// target, each with a reference the session gives back as it ends.
	shared map[string]*identityFile
}

// plan turns req into the session's plan on this host: the checks of the
// request only this backend makes (against the host's paths, its
// mechanism sets and its write roots' owners), then BuildPlan. layers are
// the mounts the daemon made for the policy's layered paths. b.mu is held.
func (b *backend) plan(req launcher.PlanRequest, layers map[string]*os.File) (*sessionPlan, error) {
	p := req.Policy
	fs := p.GetFilesystem()
	if err := checkPaths(fs); err != nil {
		return nil, err
	}
	if req.SessionSocket != "" && !filepath.IsAbs(req.SessionSocket) {
		// The init binds it from the host's root, the daemon connects to
		// it from its own working directory: only an absolute path is the
		// same place for both.
		return nil, fmt.Errorf("session socket %q is not an absolute path", req.SessionSocket)
	}
	set, err := b.chooseFor(req)
	if err != nil {
		return nil, err
	}
	if p.GetNetwork().GetMode() == sandboxdv1.Network_ALLOWLIST && !req.Proxy {
		return nil, &launcher.Unenforceable{
			Field: "network.allow", Mechanism: "the daemon's allowlist proxy",
			Found: "the caller gave the backend no proxy to serve", Remedy: "start the session through sandboxd, which runs the proxy",
		}
	}
	sp := &sessionPlan{
		layers:     fs.GetLayer(),
		carveOuts:  slices.Concat(fs.GetReadOnly(), fs.GetDeny()),
		limits:     p.GetLimits(),
		privateTmp: !coveredBy("/tmp", fs.GetWrite()),
	}
	// The directory of the shared identity files is kept from the
	// sandbox as the daemon's state is, masked, beneath a write root or
	// layer, where a root caller's grant is ID-mapped and the files would
	// be the sandbox's to read and rewrite for every session. Elsewhere
	// it is root's 0700 in a read-only view: no mount spent on it.
	for _, d := range b.identities.trees() {
		// A root within it is refused as one within the daemon's state
		// (refuseWithinDaemonState): its files' names are the daemon's
		// to choose and may be guessed.
		if roots := slices.Concat(fs.GetWrite(), fs.GetLayer()); coveredBy(d, roots) || anyWithin(roots, d) {
			req.Protect = append(slices.Clip(req.Protect), d)
		}
	}
	sp.mapped, sp.keys, sp.notes = idmapPlan(fs.GetWrite(), set, identity{uid: req.UID, gid: req.GID, rootCaller: req.RootCaller, groups: req.CallerGroups})
	if err := refuseMappedHostTrees(fs.GetLayer(), req.UID); err != nil {
		return nil, err
	}
	host := b.host.planHost(set, existsIn(layers))
	host.Idmapped = sp.mapped
	if set == SetLandlock {
		host.OpenToSandbox = openToSandbox(req.Protect, req.UID, req.GID)
	}
	if set == SetNamespaces {
		host.Passwd, host.Group = sandboxIdentityFiles(&b.identity, req.UID, req.GID)
		for _, c := range []struct {
			target, content string
			shared          *bool
		}{{"/etc/passwd", host.Passwd, &host.SharedPasswd}, {"/etc/group", host.Group, &host.SharedGroup}} {
			if f := b.identities.take(c.content); f != nil {
				if sp.shared == nil {
					sp.shared = map[string]*identityFile{}
				}
				sp.shared[c.target] = f
				*c.shared = true
			}
		}
	}
	if sp.Plan, err = BuildPlan(req, host); err != nil {
		b.identities.release(sp.shared)
		return nil, err
	}
	return sp, nil
}

// chooseFor picks the mechanism set of req's session. A child gets its
// parent's or none: another set confines by other means, and the landlock
// set would show it the host's /tmp, /run and processes its parent never
// saw.
func (b *backend) chooseFor(req launcher.PlanRequest) (MechanismSet, error) {
	p := req.Policy
	children := req.SessionSocket != "" || p.GetChildren().GetAllow()
	if !req.Child {
		return choose(p, b.host, b.forced, children)
	}
	parent, err := ParseMechanismSet(req.ParentMechanismSet)
	if err != nil || parent == "" {
		return "", &launcher.Unenforceable{
			Field: policy.FieldChildrenAllow, Mechanism: "the parent's mechanism set",
			Found:  fmt.Sprintf("the daemon named none this backend has (%q)", req.ParentMechanismSet),
			Remedy: "start the child through its parent's session socket",
		}
	}
	set, err := choose(p, b.host, parent, children)
	var u *launcher.Unenforceable
	// The parent's set is named only where it is the reason: where the
	// daemon's choice for a session of its own would have served.
	if errors.As(err, &u) {
		if _, other := choose(p, b.host, b.forced, children); other == nil {
			u.Found += fmt.Sprintf("; a child runs under its parent's mechanism set, %s", parent)
		}
	}
	return set, err
}

// checkPaths refuses policies whose paths cross symlinks: the policy names
// the place it protects, and a symlink would silently move that place.
func checkPaths(fs *sandboxdv1.Filesystem) error {
	for i, w := range fs.GetWrite() {
		field := fmt.Sprintf("filesystem.write[%d]", i)
		if within(w, "/proc") || within(w, "/sys") {
			// A bind of the host's /proc/PID or sysfs would hand the
			// sandbox host processes and kernel knobs.
			return &policy.FieldError{Field: field, Msg: fmt.Sprintf("%q is a kernel interface, not a place to write files", w)}
		}
		if _, err := os.Lstat(w); err != nil {
			// A bind needs something to cover; the daemon does not make
			// write roots, as it could not know whose they should be.
			if errors.Is(err, os.ErrNotExist) {
				return &policy.FieldError{Field: field, Msg: fmt.Sprintf("%s does not exist; create it first", w)}
			}
			var pe *os.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return &policy.FieldError{Field: field, Msg: fmt.Sprintf("%s: %v", w, err)}
		}
		if err := noSymlink(field, w); err != nil {
			return err
		}
	}
	for i, r := range fs.GetReadOnly() {
		if err := noSymlink(fmt.Sprintf("filesystem.read_only[%d]", i), r); err != nil {
			return err
		}
	}
	for i, d := range fs.GetDeny() {
		if err := noSymlink(fmt.Sprintf("filesystem.deny[%d]", i), d); err != nil {
			return err
		}
	}
	return nil
}

func noSymlink(field, path string) error {
	// Most paths are clean and cross no symlink, which one open that
	// refuses every symlink on its way shows; the walk below, a system
	// call per component, says which symlink a refused path crosses.
	if filepath.IsAbs(path) && filepath.Clean(path) == path {
		for existing := path; ; existing = filepath.Dir(existing) {
			fd, err := unix.Openat2(unix.AT_FDCWD, existing, &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS})
			if err == nil {
				unix.Close(fd)
				return nil
			}
			if err != unix.ENOENT || existing == "/" {
				break
			}
		}
	}
	return symlinkWalk(field, path)
}

// symlinkWalk is noSymlink's check by resolving the longest part of path
// that exists.
func symlinkWalk(field, path string) error {
	existing := path
	var resolved string
	for {
		if _, err := os.Lstat(existing); err != nil && existing != "/" {
			existing = filepath.Dir(existing)
			continue
		}
		var err error
		resolved, err = filepath.EvalSymlinks(existing)
		if errors.Is(err, os.ErrNotExist) && existing != "/" {
			// Gone since the Lstat: a placeholder another session
			// released. What is left of the path is what counts.
			existing = filepath.Dir(existing)
			continue
		}
		if err != nil {
			return &policy.FieldError{Field: field, Msg: fmt.Sprintf("%q: %v", path, err)}
		}
		break
	}
	if resolved != existing {
		return &policy.FieldError{Field: field, Msg: fmt.Sprintf("%q crosses a symlink: %q resolves to %q; name the real path", path, existing, resolved)}
	}
	return nil
}

// openToSandbox are the directories of dirs that uid and gid (the
// sandbox's, whose primary group is its only one) may search by their
// modes, or that carry an access ACL: a root daemon's state directory is
// its own, 0700, and needs no more; a rootless daemon's is the sandbox
// uid's too.
func openToSandbox(dirs []string, uid, gid uint32) []string {
	var open []string
	for _, d := range dirs {
		var st unix.Stat_t
		if err := unix.Stat(d, &st); errors.Is(err, unix.ENOENT) {
			// Not there: nothing in it to keep.
			continue
		} else if err != nil {
			// Unknown is kept out, as open would be.
			open = append(open, d)
			continue
		}
		perm := st.Mode & 0o7
		switch {
		case st.Uid == uid:
			perm = st.Mode >> 6 & 0o7
		case st.Gid == gid:
			perm = st.Mode >> 3 & 0o7
		}
		// An access ACL beyond the modes (named users or groups) may let
		// the sandbox's uid in whatever they say: taken as open.
		_, aclErr := unix.Lgetxattr(d, "system.posix_acl_access", nil)
		if perm&0o5 != 0 || aclErr == nil {
			open = append(open, d)
		}
	}
	return open
}

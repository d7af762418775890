package daemon

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/sandboxd/sandboxd/launcher"
	launcherlinux "github.com/sandboxd/sandboxd/launcher_linux"
)

// CheckMechanismSet rejects a forced mechanism set the backend does not
// have, before anything is probed.
func CheckMechanismSet(name string) error {
	_, err := launcherlinux.ParseMechanismSet(name)
	return err
}

// DefaultBackend is the sandbox backend for this OS: namespaces, Landlock
// and seccomp on Linux. It probes the host before returning.
func DefaultBackend(opts BackendOptions) (launcher.Backend, error) {
	if dir := journalDir(opts); dir != "" {
		// Before the backend obeys the journal there.
		if _, err := stateDir(dir); err != nil {
			return nil, fmt.Errorf("daemon: state directory %q: %w", dir, err)
		}
	}
	return launcherlinux.New(launcherlinux.Config{
		SandboxUID:   opts.SandboxUID,
		SandboxGID:   opts.SandboxGID,
		MechanismSet: opts.MechanismSet,
		StateDir:     journalDir(opts),
		InitPath:     opts.InitPath,
		IdentityDir:  identityDir(opts),
		Logf:         opts.Logf,
		// Two cover one client launching back to back, the refill
		// running behind each launch; more would only idle.
		Prestart: 2,
		// The next launch of a client comes within milliseconds; a
		// second of an empty directory in a workspace spares it the
		// placeholder's removal and remaking.
		PlaceholderLinger: time.Second,
	})
}

// journalDir is where the Linux backend keeps its journal: nowhere for the
// self-test, which must leave a running daemon's alone.
func journalDir(opts BackendOptions) string {
	if opts.SelfTest {
		return ""
	}
	return opts.StateDir
}

// identityDir is where the Linux backend keeps the identity files its
// sessions share: beside the socket, as the session sockets are, for a
// daemon, and nowhere for the self-test, which runs beside a daemon that
// may have the directory and needs no sharing for its few sandboxes.
func identityDir(opts BackendOptions) string {
	if opts.SelfTest || opts.RuntimeDir == "" {
		return ""
	}
	// Resolved, as the sockets and the state directory are: a sandbox's
	// write roots are, and a mask planned under a symlinked spelling
	// (/var/run for /run) would cover nothing.
	return filepath.Join(protectedPath(opts.RuntimeDir), "sandboxd-identity")
}

//go:build unix

package transport

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"google.golang.org/grpc"
)

// OpenSessionSocket listens on a new socket for session id in dir and
// serves srv on it. The socket belongs to the sandbox's identity with mode
// 0600; the directory is 0711, so a sandbox whose mount namespace did not
// hide it still could not list the other sessions' sockets.
func OpenSessionSocket(srv *grpc.Server, dir, id string, uid, gid uint32) (*SessionSocket, error) {
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return nil, fmt.Errorf("session socket directory: %w", err)
	}
	if err := checkSessionDir(dir); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, id+".sock")
	if len(path) >= maxSocketPath {
		return nil, fmt.Errorf("session socket %s: longer than the %d bytes a unix socket address holds; use a shorter session socket directory", path, maxSocketPath-1)
	}
	lis, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("session socket: %w", err)
	}
	ss := &SessionSocket{path: path, lis: lis, file: true}
	if err := os.Chmod(path, 0o600); err != nil {
		ss.Close()
		return nil, fmt.Errorf("session socket: %w", err)
	}
	if os.Geteuid() == 0 {
		if err := os.Chown(path, int(uid), int(gid)); err != nil {
			ss.Close()
			return nil, fmt.Errorf("session socket: %w", err)
		}
	}
	go func() {
		// Serve returns when the socket is closed at the session's end, or
		// when the server stops; no call can come in after either.
		_ = srv.Serve(scopedListener{Listener: lis, session: id})
		ss.Close()
	}()
	return ss, nil
}

// PrepareSessionSocketDir makes dir, the session sockets' directory, and
// removes the sockets a daemon that died left there. It runs before any
// sandbox runs: made later, a sandbox with a write root above it could
// make it first (or a symlink there), and the daemon would serve its
// sessions in the sandbox's directory. Neither a symlink nor a directory
// another user owns or may write to is taken.
//
// A socket is removed only when a connect to it is refused, which is what
// a socket nobody listens on gives: holding the main socket does not make
// the directory this daemon's alone, as a daemon embedding Serve with a
// listener of its own may name (or default to) the directory a running
// daemon serves its sessions in, whose live sockets must stay.
func PrepareSessionSocketDir(dir string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return fmt.Errorf("session socket directory: %w", err)
	}
	if err := os.Mkdir(dir, 0o711); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("session socket directory: %w", err)
	}
	if err := checkSessionDir(dir); err != nil {
		return err
	}
	socks, err := filepath.Glob(filepath.Join(dir, "*.sock"))
	if err != nil {
		return err
	}
	for _, p := range socks {
		if !stale(p) {
			continue
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove stale session socket: %w", err)
		}
	}
	return nil
}

// stale reports whether nothing listens on the socket at p. Any answer but
// a refusal (a connection, EAGAIN from a full backlog on Linux, EACCES)
// keeps it: a socket left behind costs a name, a live one removed costs a
// session its children. BSD-derived kernels (macOS) refuse a connect to a
// full backlog too, so there a busy session socket of another daemon
// sharing the directory (two daemons whose sockets are in one directory,
// without --session-socket-dir apart) could be taken for stale.
func stale(p string) bool {
	c, err := net.DialTimeout("unix", p, time.Second)
	if err == nil {
		c.Close()
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

// checkSessionDir refuses a session sockets' directory that is a symlink,
// or that another user owns or may write to.
func checkSessionDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("session socket directory: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("session socket directory %s is not a directory (a symlink?); remove it", dir)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int64(st.Uid) != int64(os.Geteuid()) || fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("session socket directory %s must be this user's and writable by no one else (mode %v); remove it", dir, fi.Mode().Perm())
	}
	return nil
}

//go:build unix

package transport

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"

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
	if err := checkOwnDir(dir); err != nil {
		return nil, fmt.Errorf("session socket directory: %w", err)
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

// RemoveStaleSessionSockets removes the session sockets a daemon that died
// left behind. It runs once this daemon holds the main socket, so no other
// daemon can be serving them.
func RemoveStaleSessionSockets(dir string) error {
	stale, err := filepath.Glob(filepath.Join(dir, "*.sock"))
	if err != nil {
		return err
	}
	for _, p := range stale {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove stale session socket: %w", err)
		}
	}
	return nil
}

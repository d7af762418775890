//go:build unix

package transport

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"time"
)

// maxSocketPath is the size of sun_path: 108 bytes on Linux, 104 on macOS
// and the BSDs. Socket paths are held to it with room for the NUL, which
// every client can dial; a longer one would fail to bind with a bare
// EINVAL.
const maxSocketPath = len(syscall.RawSockaddrUnix{}.Path)

// Listen listens on the unix socket at path. It creates the parent
// directory, replaces a stale socket left by a daemon that died, refuses to
// displace a daemon that still answers, and makes the socket 0660 so only
// its owner and group may start sandboxes.
func Listen(path string) (net.Listener, error) {
	if path == "" {
		return nil, errors.New("listen: no socket path")
	}
	if len(path) >= maxSocketPath {
		return nil, fmt.Errorf("listen %s: %d bytes, longer than the %d a unix socket address holds on %s; use a shorter socket path", path, len(path), maxSocketPath-1, runtime.GOOS)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	if err := checkOwnDir(dir); err != nil {
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	if err := removeStale(path); err != nil {
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	lis, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o660); err != nil {
		lis.Close()
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	return lis, nil
}

// checkOwnDir refuses a socket directory owned by another user (other than
// root), who could swap the socket for one of their own; /tmp/sandboxd-<uid>
// is open to squatting.
func checkOwnDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if st.Uid != 0 && int64(st.Uid) != int64(os.Geteuid()) {
		return fmt.Errorf("directory %s is owned by uid %d, not by this user", dir, st.Uid)
	}
	if fi.Mode().Perm()&0o022 != 0 && fi.Mode()&fs.ModeSticky == 0 {
		return fmt.Errorf("directory %s is writable by others (mode %v)", dir, fi.Mode().Perm())
	}
	return nil
}

// removeStale removes the socket at path when nothing answers on it.
func removeStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("%s exists and is not a socket", path)
	}
	conn, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		conn.Close()
		return errors.New("another daemon is already serving this socket")
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove stale socket: %w", err)
	}
	return nil
}

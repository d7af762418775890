package transport

import (
	"fmt"

	"github.com/Microsoft/go-winio"
	"google.golang.org/grpc"

	launcherwindows "github.com/sandboxd/sandboxd/launcher_windows"
)

// OpenSessionSocket makes the named pipe of session id
// (launcherwindows.SessionPipeName) and serves srv on it. Its security
// descriptor lets in SYSTEM, administrators and tokens of a sandbox user
// that carry the session's own SID, which the backend gives this session's
// token alone; the pipe exists before the backend has picked the user, so
// both sandbox users are named. Pipes have no directory, so dir is unused,
// and no owner to set, so neither are uid and gid.
func OpenSessionSocket(srv *grpc.Server, _, id string, _, _ uint32) (*SessionSocket, error) {
	offline, online, err := launcherwindows.UserSIDs()
	if err != nil {
		return nil, fmt.Errorf("session pipe: sandbox users: %w", err)
	}
	name := launcherwindows.SessionPipeName(id)
	lis, err := winio.ListenPipe(name, &winio.PipeConfig{SecurityDescriptor: launcherwindows.SessionPipeSDDL(id, []string{offline, online})})
	if err != nil {
		return nil, fmt.Errorf("session pipe: %w", err)
	}
	ss := &SessionSocket{path: name, lis: lis}
	go func() {
		// Serve returns when the pipe is closed at the session's end, or
		// when the server stops; no call can come in after either.
		_ = srv.Serve(scopedListener{Listener: lis, session: id})
		ss.Close()
	}()
	return ss, nil
}

// PrepareSessionSocketDir has nothing to do: a pipe vanishes with the
// last handle to it, so a daemon that died left none behind, and pipes have no directory.
func PrepareSessionSocketDir(string) error { return nil }

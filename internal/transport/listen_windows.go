package transport

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/Microsoft/go-winio"
	"golang.org/x/sys/windows"

	launcherwindows "github.com/sandboxd/sandboxd/launcher_windows"
)

// pipePrefix is where local named pipes live; a remote one
// (\\host\pipe\...) is refused, as the pipe itself refuses remote clients.
const pipePrefix = `\\.\pipe\`

// Listen listens on the named pipe at path with an explicit security
// descriptor (launcherwindows.MainPipeSDDL): SYSTEM and administrators in
// full, authenticated users read and write, and the sandbox users denied
// once `sandboxd install` has made them, so that no sandbox reaches the
// main pipe whatever its token. The first instance is created exclusively:
// a daemon still serving the pipe, or anyone who took its name first, makes
// Listen fail rather than share the name.
func Listen(path string) (net.Listener, error) {
	if len(path) <= len(pipePrefix) || !strings.EqualFold(path[:len(pipePrefix)], pipePrefix) {
		return nil, fmt.Errorf(`listen %s: not a local named pipe; on windows the daemon serves on \\.\pipe\NAME`, path)
	}
	offline, online, err := launcherwindows.UserSIDs()
	if err != nil {
		return nil, fmt.Errorf("listen %s: sandbox users: %w", path, err)
	}
	lis, err := winio.ListenPipe(path, &winio.PipeConfig{SecurityDescriptor: launcherwindows.MainPipeSDDL(offline, online)})
	switch {
	case errors.Is(err, windows.ERROR_ACCESS_DENIED):
		// What creating the first instance of an existing pipe fails with.
		return nil, fmt.Errorf("listen %s: %w (is another daemon, or another program, serving this pipe?)", path, err)
	case err != nil:
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	return lis, nil
}

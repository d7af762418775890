package conformance

import launcherlinux "github.com/sandboxd/sandboxd/launcher_linux"

// sessionSocketIn is where session id's sandbox finds its session socket:
// the same path in every sandbox, bound there in its mount namespace.
func sessionSocketIn(string) string {
	return launcherlinux.SessionSocketPath
}

// sessionSocketInScript is the session socket's path in a script run in a
// sandbox, which must find nothing there when the sandbox has none.
func sessionSocketInScript() string {
	return launcherlinux.SessionSocketPath
}

package conformance

// sessionSocketIn is where session id's sandbox finds its session socket:
// without mount namespaces, at its host path.
func sessionSocketIn(id string) string {
	return hostSessionSocket(id)
}

// sessionSocketInScript is the session socket's path in a script run in a
// sandbox: its host path, which only the sandbox's environment tells; a
// sandbox without one tries where a session's socket would be.
func sessionSocketInScript() string {
	return `"${SANDBOXD_SOCKET:-` + hostSessionSocket("none") + `}"`
}

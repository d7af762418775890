package launcherwindows

import "strings"

// MainPipeName is the daemon's API pipe.
const MainPipeName = `\\.\pipe\sandboxd`

// sessionPipePrefix starts the name of every session pipe.
const sessionPipePrefix = `\\.\pipe\sandboxd-session-`

// MainPipeSDDL is the security descriptor of the main pipe: SYSTEM and
// Administrators in full, authenticated users read and write (the daemon
// authorizes each call), and the sandbox users not at all, so that a
// sandbox reaches the daemon only through its own session pipe. An empty
// SID (a user not provisioned) gets no entry. A write-restricted sandbox
// token would fail the restricting pass anyway; the deny entries keep that
// true of any token of the sandbox users.
func MainPipeSDDL(offlineSID, onlineSID string) string {
	var b strings.Builder
	b.WriteString("D:P")
	for _, sid := range []string{offlineSID, onlineSID} {
		if sid != "" {
			b.WriteString("(D;;GA;;;" + sid + ")")
		}
	}
	b.WriteString("(A;;GA;;;SY)(A;;GA;;;BA)(A;;GRGW;;;AU)")
	return b.String()
}

// SessionPipeName is the pipe of session id, which the sandbox of a policy
// with children.allow uses to ask for child sandboxes.
func SessionPipeName(id string) string {
	return sessionPipePrefix + id
}

// SessionPipeSDDL is the security descriptor of session id's pipe: SYSTEM
// and Administrators in full, and read and write for a token that is one
// of userSIDs (the normal pass) and carries SessionSID(id) (the
// restricting pass). Only the session's own token has both.
func SessionPipeSDDL(id string, userSIDs []string) string {
	var b strings.Builder
	b.WriteString("D:P(A;;GA;;;SY)(A;;GA;;;BA)")
	for _, sid := range userSIDs {
		if sid != "" {
			b.WriteString("(A;;GRGW;;;" + sid + ")")
		}
	}
	b.WriteString("(A;;GRGW;;;" + SessionSID(id) + ")")
	return b.String()
}

package transport

import (
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"

	"golang.org/x/sys/windows"
)

// procImpersonateNamedPipeClient is not in x/sys/windows.
var procImpersonateNamedPipeClient = windows.NewLazySystemDLL("advapi32.dll").NewProc("ImpersonateNamedPipeClient")

// peerCaller asks the system who is at the client end of a named pipe: the
// process the pipe records and the user of the token the client opened the
// pipe with, which a client cannot forge (it can only withhold it, and is
// refused then). A connection accepted on a session's pipe also carries
// that session.
func peerCaller(conn net.Conn) (Caller, error) {
	var scope string
	if sc, ok := conn.(*scopedConn); ok {
		scope, conn = sc.session, sc.Conn
	}
	// go-winio's pipe connections expose their handle this way.
	p, ok := conn.(interface{ Fd() uintptr })
	if !ok {
		return Caller{}, fmt.Errorf("%T is not a named pipe connection", conn)
	}
	h := windows.Handle(p.Fd())
	var pid uint32
	if err := windows.GetNamedPipeClientProcessId(h, &pid); err != nil {
		return Caller{}, fmt.Errorf("GetNamedPipeClientProcessId: %w", err)
	}
	tok, err := clientToken(h)
	if err != nil {
		return Caller{}, err
	}
	defer tok.Close()
	user, err := tok.GetTokenUser()
	if err != nil {
		return Caller{}, fmt.Errorf("client token: user: %w", err)
	}
	admin, err := isAdmin(tok, user.User.Sid)
	if err != nil {
		return Caller{}, err
	}
	return Caller{PID: int32(pid), SID: user.User.Sid.String(), Admin: admin, Session: scope}, nil
}

// clientToken returns the token the client opened the pipe with. Reading it
// means wearing the client's identity on one OS thread for a moment: the
// thread is locked to a goroutine of its own, so nothing else ever runs as
// the client; should RevertToSelf fail, the goroutine ends with the thread
// still locked, and the runtime then ends the thread instead of reusing it.
func clientToken(h windows.Handle) (windows.Token, error) {
	type result struct {
		tok windows.Token
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		if r, _, err := procImpersonateNamedPipeClient.Call(uintptr(h)); r == 0 {
			runtime.UnlockOSThread()
			done <- result{err: clientTokenError("ImpersonateNamedPipeClient", err)}
			return
		}
		var tok windows.Token
		// Opened as the daemon: a client that allows identification only
		// lends a token that may not itself be used to open anything.
		openErr := windows.OpenThreadToken(windows.CurrentThread(), windows.TOKEN_QUERY, true, &tok)
		if err := windows.RevertToSelf(); err != nil {
			if openErr == nil {
				tok.Close()
			}
			done <- result{err: fmt.Errorf("RevertToSelf after reading the pipe client's token: %w", err)}
			return
		}
		runtime.UnlockOSThread()
		if openErr != nil {
			done <- result{err: clientTokenError("OpenThreadToken", openErr)}
			return
		}
		done <- result{tok: tok}
	}()
	r := <-done
	return r.tok, r.err
}

// clientTokenError says what the client must do when it did not let the
// daemon read who it is.
func clientTokenError(op string, err error) error {
	if errors.Is(err, windows.ERROR_CANT_OPEN_ANONYMOUS) || errors.Is(err, windows.ERROR_CANNOT_IMPERSONATE) {
		return fmt.Errorf("%s: %w: the client must open the pipe with SECURITY_SQOS_PRESENT and at least SECURITY_IDENTIFICATION, as sandboxd's client does", op, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// isAdmin says whether the client of token tok, whose user is user, sees
// and controls every session: LocalSystem, the daemon's own account, or a
// token in which BUILTIN\Administrators is enabled. The check is on the
// token, not the account: an administrator's unelevated token, in which UAC
// made the group deny-only, does not count.
func isAdmin(tok windows.Token, user *windows.SID) (bool, error) {
	if user.IsWellKnown(windows.WinLocalSystemSid) {
		return true, nil
	}
	self, err := daemonSID()
	if err != nil {
		return false, err
	}
	if user.String() == self {
		return true, nil
	}
	admins, err := windows.CreateWellKnownSid(windows.WinBuiltinAdministratorsSid)
	if err != nil {
		return false, fmt.Errorf("administrators SID: %w", err)
	}
	member, err := tok.IsMember(admins)
	if err != nil {
		return false, fmt.Errorf("client token: administrators membership: %w", err)
	}
	return member, nil
}

// daemonSID is the user SID of the daemon's own process.
var daemonSID = sync.OnceValues(func() (string, error) {
	user, err := windows.GetCurrentProcessToken().GetTokenUser()
	if err != nil {
		return "", fmt.Errorf("daemon's own token: user: %w", err)
	}
	return user.User.Sid.String(), nil
})

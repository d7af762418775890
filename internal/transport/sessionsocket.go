package transport

import (
	"net"
	"os"
	"sync"
)

// SessionSocket is the socket the daemon makes for one session whose
// policy allows children. Calls arriving on it are that session's: the
// daemon knows the caller by the socket, not by anything the caller says.
type SessionSocket struct {
	path string
	lis  net.Listener
	// file is set for a unix socket, which has a file to remove; a named
	// pipe has none.
	file bool
	once sync.Once
}

// scopedListener tags every connection it accepts with its session.
type scopedListener struct {
	net.Listener
	session string
}

func (l scopedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &scopedConn{Conn: c, session: l.session}, nil
}

// scopedConn is a connection accepted on a session's socket.
type scopedConn struct {
	net.Conn
	session string
}

// Path is where the session's sandbox reaches the socket: a file on unix,
// a pipe name on Windows.
func (ss *SessionSocket) Path() string { return ss.path }

// Close stops accepting calls and removes the socket file.
func (ss *SessionSocket) Close() {
	if ss == nil {
		return
	}
	ss.once.Do(func() {
		ss.lis.Close()
		if ss.file {
			os.Remove(ss.path)
		}
	})
}

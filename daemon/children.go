package daemon

import (
	"net"
	"os"
	"sync"
)

// sessionSocket is the socket the daemon makes for one session whose
// policy allows children. Calls arriving on it are that session's: the
// daemon knows the caller by the socket, not by anything the caller says.
type sessionSocket struct {
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

// close stops accepting calls and removes the socket file.
func (ss *sessionSocket) close() {
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

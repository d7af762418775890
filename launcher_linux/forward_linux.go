package launcherlinux

import (
	"io"
	"net"
	"sync"
	"time"
)

// forwardDialTimeout bounds the connect to the host's port.
const forwardDialTimeout = 10 * time.Second

// forwardToHost joins each connection l accepts, in the sandbox's network
// namespace, to a new one to addr on the host, until l is closed.
func forwardToHost(l net.Listener, addr string) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			up, err := net.DialTimeout("tcp", addr, forwardDialTimeout)
			if err != nil {
				return
			}
			defer up.Close()
			var wg sync.WaitGroup
			wg.Go(func() {
				io.Copy(up, c)
				up.(*net.TCPConn).CloseWrite()
			})
			io.Copy(c, up)
			c.(*net.TCPConn).CloseWrite()
			wg.Wait()
		}()
	}
}

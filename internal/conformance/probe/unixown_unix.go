//go:build unix

package main

import (
	"io"
	"net"
	"time"
)

// socketOps talk between the probe's own processes over unix sockets.
func socketOps() map[string]op {
	return map[string]op{
		// unix-own listens at ADDR (a path, or @NAME for an abstract
		// name), connects to it and reads back what the listener wrote:
		// a session's processes talking among themselves.
		"unix-own": {1, unixOwn},
	}
}

func unixOwn(args []string) Result {
	l, err := net.Listen("unix", args[0])
	if err != nil {
		return outcome(err, "listen")
	}
	defer l.Close()
	const greeting = "own socket"
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		c.Write([]byte(greeting))
		c.Close()
	}()
	c, err := net.DialTimeout("unix", args[0], ioTimeout)
	if err != nil {
		return outcome(err, "connect")
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(ioTimeout))
	buf, err := io.ReadAll(io.LimitReader(c, 64))
	if err == nil && string(buf) != greeting {
		return Result{Errno: "unknown", Detail: "read " + string(buf)}
	}
	return outcome(err, nil)
}

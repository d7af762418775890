package transport

import "net"

// Activated: Windows services get no sockets passed.
func Activated() (net.Listener, bool, error) { return nil, false, nil }

// NotifyReady: the Windows service reports running through the service
// control manager instead.
func NotifyReady(string) error { return nil }

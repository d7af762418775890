package daemon

import "net"

// activatedListener: Windows services get no sockets passed.
func activatedListener() (net.Listener, bool, error) { return nil, false, nil }

// notifyReady: the Windows service reports running through the service
// control manager instead.
func notifyReady(string) error { return nil }

//go:build unix

package transport

import (
	"fmt"
	"net"

	"github.com/coreos/go-systemd/v22/activation"
	sdnotify "github.com/coreos/go-systemd/v22/daemon"
)

// Activated is the unix socket systemd passed (LISTEN_FDS, a
// .socket unit), if it passed one; activated is false when it passed none.
// The variables are cleared, so that no sandbox inherits them.
func Activated() (lis net.Listener, activated bool, err error) {
	ls, err := activation.Listeners()
	if err != nil {
		return nil, false, fmt.Errorf("socket activation: %w", err)
	}
	switch {
	case len(ls) == 0:
		return nil, false, nil
	case len(ls) > 1:
		for _, l := range ls {
			if l != nil {
				l.Close()
			}
		}
		return nil, false, fmt.Errorf("socket activation: %d sockets passed, want one (ListenStream= once in the .socket unit)", len(ls))
	case ls[0] == nil || ls[0].Addr().Network() != "unix":
		return nil, false, fmt.Errorf("socket activation: the passed socket is not a listening unix stream socket")
	}
	return ls[0], true, nil
}

// NotifyReady tells systemd (Type=notify) the daemon is up, with status;
// nothing without NOTIFY_SOCKET.
func NotifyReady(status string) error {
	_, err := sdnotify.SdNotify(true, sdnotify.SdNotifyReady+"\nSTATUS="+status)
	return err
}

package daemon

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// stdioPipe makes one pipe of a session's standard streams: the daemon's
// end pollable (its reads and writes wait in the runtime's poller and take
// deadlines), the sandbox's end a plain blocking file. The backend only
// passes the sandbox's end on and the daemon closes it right after Start;
// os.Pipe would register it with the poller and make it non-blocking, only
// for Fd to make it blocking again and Close to unregister it, a third of
// the cost of opening a session's pipes.
func stdioPipe(sandboxReads bool) (daemonEnd, sandboxEnd *os.File, err error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return nil, nil, fmt.Errorf("pipe2: %w", err)
	}
	d, sb := p[0], p[1]
	if sandboxReads {
		d, sb = p[1], p[0]
	}
	if err := unix.SetNonblock(d, true); err != nil {
		unix.Close(d)
		unix.Close(sb)
		return nil, nil, fmt.Errorf("pipe: set non-blocking: %w", err)
	}
	if sandboxReads {
		// Input arrives in keystrokes and pastes, and most sessions get
		// none: a pipe of one page holds one buffer slot where one of the
		// default length keeps sixteen, a 1 KiB allocation of unreclaimable
		// memory (about 0.8 KiB less per pipe). Writes stay atomic up to
		// PIPE_BUF; a longer paste waits on the poller for the command to
		// read. Left as it is, the pipe only costs more.
		unix.FcntlInt(uintptr(d), unix.F_SETPIPE_SZ, os.Getpagesize())
	}
	// NewFile makes a non-blocking descriptor pollable.
	return os.NewFile(uintptr(d), "|daemon"), os.NewFile(uintptr(sb), "|sandbox"), nil
}

package daemon

import (
	"fmt"
	"os"

	"github.com/sandboxd/sandboxd/internal/fdwait"
	"golang.org/x/sys/unix"
)

// stdioPipe makes one pipe of a session's standard streams: the daemon's
// end non-blocking, entering the runtime's poller (where its reads and
// writes wait and take deadlines) only once it is first read or written,
// the sandbox's end a plain blocking file. The backend only
// passes the sandbox's end on and the daemon closes it right after Start;
// os.Pipe would register it with the poller and make it non-blocking, only
// for Fd to make it blocking again and Close to unregister it, a third of
// the cost of opening a session's pipes.
func stdioPipe(sandboxReads bool) (daemonEnd *fdwait.Lazy, sandboxEnd *os.File, err error) {
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
		// memory (about 0.8 KiB less per pipe). The first write gives it
		// the usual length (stdio.write).
		unix.FcntlInt(uintptr(d), unix.F_SETPIPE_SZ, os.Getpagesize())
	}
	return fdwait.NewLazy(d, "|daemon"), os.NewFile(uintptr(sb), "|sandbox"), nil
}

// pipePage is the length of a short pipe (resizePipe).
var pipePage = os.Getpagesize()

// resizePipe makes an output pipe one page long, or of the default
// length, sixteen pages (long): the kernel keeps a ring of a buffer slot
// per page of a pipe's length, a 1 KiB allocation of unreclaimable memory
// at the default length, for as long as an idle session lasts (about
// 0.8 KiB more per pipe than at a page). A sandbox that writes more than a
// page at once waits for the daemon to read the first, as it waits when a
// pipe is full. A pipe that cannot change (more than a page unread, or a
// daemon over its user's pipe quota) stays as it is.
func resizePipe(fd uintptr, long bool) {
	n := pipePage
	if long {
		n *= 16
	}
	unix.FcntlInt(fd, unix.F_SETPIPE_SZ, n)
}

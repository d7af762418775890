package pty

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"
)

// Open fails: Windows has no POSIX terminals; a PTY session there runs on
// a pseudoconsole from OpenConsole.
func Open() (master, replica *os.File, err error) {
	return nil, nil, fmt.Errorf("open pty on windows: %w", errors.ErrUnsupported)
}

// pipeBuffer is the size of each direction of the master's pipe.
const pipeBuffer = 64 << 10

// drainTimeout bounds how long Close forwards the pseudoconsole's last
// output to a master nobody reads: the console host blocks writing it, and
// with it ClosePseudoConsole, until someone does.
const drainTimeout = 5 * time.Second

// Console is a pseudoconsole and the daemon's end of it.
//
// The console host needs an input it reads and an output it writes, on
// two different file objects: I/O on a synchronous file object is
// serialized, so one duplex handle would hold its output until input
// arrives. The daemon wants one file it reads output from and writes input
// to, like a POSIX master. So Master is one end of a duplex, overlapped
// named pipe and two goroutines relay between its other end and the
// console host's pipes.
type Console struct {
	// Master is the daemon's end: reads return the console's output
	// (VT sequences), writes are its input. The caller closes it.
	Master *os.File
	// Handle is the pseudoconsole (HPCON), for
	// PROC_THREAD_ATTRIBUTE_PSEUDOCONSOLE.
	Handle windows.Handle

	relay   *os.File
	inW     *os.File
	outR    *os.File
	outDone chan struct{}
	inDone  chan struct{}

	relayClose sync.Once
	closeOnce  sync.Once
	closeErr   error
}

var (
	consolesMu sync.Mutex
	// consoles finds the console of a master for Resize; the key is the
	// *os.File itself because Fd would take the handle out of the
	// runtime's poller.
	consoles = map[*os.File]*Console{}
)

// OpenConsole creates a pseudoconsole of rows by cols cells.
func OpenConsole(rows, cols uint16) (*Console, error) {
	size, err := coord(rows, cols)
	if err != nil {
		return nil, fmt.Errorf("open console: %w", err)
	}
	var inR, inW, outR, outW windows.Handle
	if err := windows.CreatePipe(&inR, &inW, nil, 0); err != nil {
		return nil, fmt.Errorf("open console: input pipe: %w", err)
	}
	if err := windows.CreatePipe(&outR, &outW, nil, 0); err != nil {
		windows.CloseHandle(inR)
		windows.CloseHandle(inW)
		return nil, fmt.Errorf("open console: output pipe: %w", err)
	}
	var hpc windows.Handle
	err = windows.CreatePseudoConsole(size, inR, outW, 0, &hpc)
	// The console host has its own copies of its ends now.
	windows.CloseHandle(inR)
	windows.CloseHandle(outW)
	if err != nil {
		windows.CloseHandle(inW)
		windows.CloseHandle(outR)
		return nil, fmt.Errorf("open console: CreatePseudoConsole: %w", err)
	}
	master, relay, err := masterPipe()
	if err != nil {
		windows.CloseHandle(inW)
		windows.CloseHandle(outR)
		windows.ClosePseudoConsole(hpc)
		return nil, fmt.Errorf("open console: %w", err)
	}
	c := &Console{
		Master: master, Handle: hpc, relay: relay,
		inW: os.NewFile(uintptr(inW), "conpty-input"), outR: os.NewFile(uintptr(outR), "conpty-output"),
		outDone: make(chan struct{}), inDone: make(chan struct{}),
	}
	go c.relayOutput()
	go c.relayInput()
	consolesMu.Lock()
	consoles[master] = c
	consolesMu.Unlock()
	return c, nil
}

func coord(rows, cols uint16) (windows.Coord, error) {
	// COORD holds signed shorts; zero would make the console host refuse
	// the size.
	if rows == 0 || cols == 0 || rows > 0x7fff || cols > 0x7fff {
		return windows.Coord{}, fmt.Errorf("console size %dx%d out of range", rows, cols)
	}
	return windows.Coord{X: int16(cols), Y: int16(rows)}, nil
}

// masterPipe makes a duplex named pipe with both ends overlapped, so each
// end can be read and written at once through the runtime's poller and
// Close interrupts a pending read. Only the daemon's own account may open
// it, and only one instance exists, which this process's client end has
// taken before the name could be used by anyone else.
func masterPipe() (server, client *os.File, err error) {
	var nonce [16]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return nil, nil, fmt.Errorf("name the master pipe: %w", err)
	}
	name := `\\.\pipe\sandboxd-conpty-` + hex.EncodeToString(nonce[:])
	user, err := windows.GetCurrentProcessToken().GetTokenUser()
	if err != nil {
		return nil, nil, fmt.Errorf("master pipe %s: the daemon's account: %w", name, err)
	}
	sd, err := windows.SecurityDescriptorFromString("D:P(A;;GA;;;" + user.User.Sid.String() + ")")
	if err != nil {
		return nil, nil, fmt.Errorf("master pipe %s: security descriptor: %w", name, err)
	}
	sa := &windows.SecurityAttributes{SecurityDescriptor: sd}
	sa.Length = uint32(unsafe.Sizeof(*sa))
	name16, err := windows.UTF16PtrFromString(name)
	if err != nil {
		return nil, nil, fmt.Errorf("master pipe %s: %w", name, err)
	}
	sh, err := windows.CreateNamedPipe(name16,
		windows.PIPE_ACCESS_DUPLEX|windows.FILE_FLAG_OVERLAPPED|windows.FILE_FLAG_FIRST_PIPE_INSTANCE,
		windows.PIPE_TYPE_BYTE|windows.PIPE_READMODE_BYTE|windows.PIPE_WAIT|windows.PIPE_REJECT_REMOTE_CLIENTS,
		1, pipeBuffer, pipeBuffer, 0, sa)
	if err != nil {
		return nil, nil, fmt.Errorf("master pipe %s: CreateNamedPipe: %w", name, err)
	}
	// A pipe instance accepts a client as soon as it exists; the server
	// need not wait in ConnectNamedPipe for one that connects right away.
	ch, err := windows.CreateFile(name16, windows.GENERIC_READ|windows.GENERIC_WRITE, 0, nil, windows.OPEN_EXISTING,
		windows.FILE_FLAG_OVERLAPPED|windows.SECURITY_SQOS_PRESENT|windows.SECURITY_IDENTIFICATION, 0)
	if err != nil {
		windows.CloseHandle(sh)
		return nil, nil, fmt.Errorf("master pipe %s: connect: %w", name, err)
	}
	return os.NewFile(uintptr(sh), "conpty"), os.NewFile(uintptr(ch), "conpty-relay"), nil
}

// relayOutput copies the console's output to the master until the console
// host closes it. Once the master's side stops taking it, the rest is read
// and dropped: a console host blocked on a full pipe would never exit.
func (c *Console) relayOutput() {
	defer close(c.outDone)
	defer c.outR.Close()
	buf := make([]byte, 32<<10)
	forward := true
	for {
		n, err := c.outR.Read(buf)
		if n > 0 && forward {
			if _, werr := c.relay.Write(buf[:n]); werr != nil {
				forward = false
			}
		}
		if err != nil {
			return
		}
	}
}

// relayInput copies what the daemon writes to the master to the console's
// input until the relay end is closed.
func (c *Console) relayInput() {
	defer close(c.inDone)
	// Only errors end the copy, and all of them mean the same: no more
	// input will come.
	_, _ = io.Copy(c.inW, c.relay)
}

// Interrupt types Ctrl-C: the console host turns it into CTRL_C_EVENT for
// the processes attached to it, as a terminal's line discipline turns ^C
// into SIGINT.
func (c *Console) Interrupt() error {
	if _, err := c.inW.Write([]byte{0x03}); err != nil {
		return fmt.Errorf("write ^C to the console: %w", err)
	}
	return nil
}

func (c *Console) closeRelay() {
	c.relayClose.Do(func() { c.relay.Close() })
}

// Close closes the pseudoconsole, which ends what is still attached to it,
// forwards its last output, and then ends the master's stream: the daemon
// reads end of file after the last byte. Master itself stays open.
func (c *Console) Close() error {
	c.closeOnce.Do(func() {
		consolesMu.Lock()
		delete(consoles, c.Master)
		consolesMu.Unlock()
		giveUp := time.AfterFunc(drainTimeout, c.closeRelay)
		windows.ClosePseudoConsole(c.Handle)
		<-c.outDone
		giveUp.Stop()
		c.closeRelay()
		<-c.inDone
		c.closeErr = c.inW.Close()
		if c.closeErr != nil {
			c.closeErr = fmt.Errorf("close console input: %w", c.closeErr)
		}
	})
	return c.closeErr
}

// Resize sets the size of the pseudoconsole whose master is master; the
// console host tells the processes attached to it
// (WINDOW_BUFFER_SIZE_EVENT).
func Resize(master *os.File, rows, cols uint16) error {
	consolesMu.Lock()
	c := consoles[master]
	consolesMu.Unlock()
	if c == nil {
		return fmt.Errorf("resize console to %dx%d: %s is not the master of an open console", rows, cols, master.Name())
	}
	size, err := coord(rows, cols)
	if err == nil {
		err = windows.ResizePseudoConsole(c.Handle, size)
	}
	if err != nil {
		return fmt.Errorf("resize console to %dx%d: %w", rows, cols, err)
	}
	return nil
}

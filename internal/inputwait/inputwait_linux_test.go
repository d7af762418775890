//go:build amd64

package inputwait

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/pty"
)

// The test binary doubles as the programs under test: with helperEnv set it
// runs helper(os.Args[1:]) instead of the tests.
const helperEnv = "INPUTWAIT_TEST_HELPER"

var self string

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		if err := helper(os.Args[1], os.Args[2:]); err != nil {
			fmt.Fprintf(os.Stderr, "helper %s: %v\n", os.Args[1], err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	var err error
	if self, err = os.Executable(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// waitModes block on their input with one system call each, read a line
// once it is readable, then sleep without reading.
var waitModes = []string{
	"read", "readv", "preadv2",
	"poll", "ppoll", "select", "pselect6",
	"epoll_wait", "epoll_pwait", "epoll_pwait2",
	"devtty", "devtty-epoll_wait",
}

func helper(mode string, args []string) error {
	switch mode {
	case "spawn":
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
		return cmd.Run()
	case "undumpable":
		if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
			return err
		}
		_, err := unix.Read(0, make([]byte, 1))
		return err
	case "background":
		return backgroundHelper()
	case "backoff":
		mode := ""
		if len(args) > 0 {
			mode = args[0]
		}
		return backoffHelper(mode)
	case "keepalive":
		return keepaliveHelper()
	case "closed-fd":
		if err := closedFdHelper(args[0]); err != nil {
			return err
		}
		mode = "read"
	}
	fd := 0
	if rest, ok := strings.CutPrefix(mode, "devtty"); ok {
		var err error
		if fd, err = unix.Open("/dev/tty", unix.O_RDONLY, 0); err != nil {
			return err
		}
		mode = strings.TrimPrefix(rest, "-")
		if mode == "" {
			mode = "read"
		}
	}
	consumed, err := block(mode, fd)
	if err != nil {
		return err
	}
	if !consumed {
		if _, err := unix.Read(fd, make([]byte, 4096)); err != nil {
			return err
		}
	}
	time.Sleep(time.Hour)
	return nil
}

// block returns once fd is readable, having waited for it in the system
// call that mode names, and tells whether it consumed the input doing so.
func block(mode string, fd int) (consumed bool, err error) {
	buf := make([]byte, 4096)
	iov := unix.Iovec{Base: &buf[0]}
	iov.SetLen(len(buf))
	pfd := unix.PollFd{Fd: int32(fd), Events: unix.POLLIN}
	var set unix.FdSet
	set.Set(fd)
	var ev [1]unix.EpollEvent
	var epfd int
	if strings.HasPrefix(mode, "epoll") {
		if epfd, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
			return false, err
		}
		if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}); err != nil {
			return false, err
		}
	}
	consumed = strings.Contains(mode, "read")
	for {
		var errno syscall.Errno
		switch mode {
		case "read":
			_, _, errno = unix.Syscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)))
		case "readv":
			_, _, errno = unix.Syscall(unix.SYS_READV, uintptr(fd), uintptr(unsafe.Pointer(&iov)), 1)
		case "preadv2":
			// Offset -1: the current position, which is what lets it read a
			// pipe or a terminal at all.
			_, _, errno = unix.Syscall6(unix.SYS_PREADV2, uintptr(fd), uintptr(unsafe.Pointer(&iov)), 1, ^uintptr(0), 0, 0)
		case "poll":
			_, _, errno = unix.Syscall(unix.SYS_POLL, uintptr(unsafe.Pointer(&pfd)), 1, ^uintptr(0))
		case "ppoll":
			_, _, errno = unix.Syscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&pfd)), 1, 0, 0, 0, 0)
		case "select":
			_, _, errno = unix.Syscall6(unix.SYS_SELECT, uintptr(fd+1), uintptr(unsafe.Pointer(&set)), 0, 0, 0, 0)
		case "pselect6":
			_, _, errno = unix.Syscall6(unix.SYS_PSELECT6, uintptr(fd+1), uintptr(unsafe.Pointer(&set)), 0, 0, 0, 0)
		case "epoll_wait":
			_, _, errno = unix.Syscall6(unix.SYS_EPOLL_WAIT, uintptr(epfd), uintptr(unsafe.Pointer(&ev[0])), 1, ^uintptr(0), 0, 0)
		case "epoll_pwait":
			_, _, errno = unix.Syscall6(unix.SYS_EPOLL_PWAIT, uintptr(epfd), uintptr(unsafe.Pointer(&ev[0])), 1, ^uintptr(0), 0, 0)
		case "epoll_pwait2":
			_, _, errno = unix.Syscall6(unix.SYS_EPOLL_PWAIT2, uintptr(epfd), uintptr(unsafe.Pointer(&ev[0])), 1, 0, 0, 0)
		default:
			return false, fmt.Errorf("unknown mode %q", mode)
		}
		if errno != unix.EINTR {
			if errno != 0 {
				return false, errno
			}
			return consumed, nil
		}
	}
}

// backgroundHelper runs as a session leader on the terminal (its fd 0). It
// starts a reader of the terminal as the foreground group and reports its
// pid on fd 3; on SIGUSR1 it makes a sleeper the foreground group, leaving
// the reader blocked in its read, and reports the sleeper's pid.
func backgroundHelper() error {
	report := os.NewFile(3, "report")
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	start := func(name string, args ...string) (*exec.Cmd, error) {
		cmd := exec.Command(name, args...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
		// The child makes its group the foreground one before exec, with
		// signals blocked, so the kernel does not stop it with SIGTTOU.
		cmd.SysProcAttr = &syscall.SysProcAttr{Foreground: true, Ctty: 0}
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		_, err := fmt.Fprintln(report, cmd.Process.Pid)
		return cmd, err
	}
	reader, err := start("sh", "-c", "read x")
	if err != nil {
		return err
	}
	<-usr1
	sleeper, err := start("sleep", "60")
	if err != nil {
		return err
	}
	reader.Wait()
	return sleeper.Wait()
}

// closedFdHelper leaves a thread blocked in a call on a descriptor of
// its own, then closes the descriptor: the call holds the file and waits
// on. With "read" the thread reads a pipe nobody writes to, for ever; with
// "connect" it connects to a listener whose backlog is full, which drops
// the connection's SYNs for minutes; with "recv" it waits for the answer
// to a request it sent a peer that never answers.
func closedFdHelper(call string) error {
	fd, nr := -1, unix.SYS_READ
	buf := make([]byte, 1)
	var sa unix.Sockaddr
	switch call {
	case "read":
		var fds [2]int
		if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
			return err
		}
		fd = fds[0]
	case "connect", "recv":
		l, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		if err := unix.Bind(l, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
			return err
		}
		// A backlog of 0 takes one connection; the next one's SYNs are
		// dropped.
		if err := unix.Listen(l, 0); err != nil {
			return err
		}
		if sa, err = unix.Getsockname(l); err != nil {
			return err
		}
		if fd, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0); err != nil {
			return err
		}
		if err := unix.Connect(fd, sa); err != nil {
			return err
		}
		nr = unix.SYS_CONNECT
		if call == "recv" {
			if _, err := unix.Write(fd, []byte("request")); err != nil {
				return err
			}
			nr = unix.SYS_RECVFROM
		} else if fd, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown call %q", call)
	}
	tids := make(chan int)
	go func() {
		runtime.LockOSThread()
		tids <- unix.Gettid()
		switch nr {
		case unix.SYS_READ:
			unix.Syscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&buf[0])), 1)
		case unix.SYS_RECVFROM:
			unix.Syscall6(unix.SYS_RECVFROM, uintptr(fd), uintptr(unsafe.Pointer(&buf[0])), 1, 0, 0, 0)
		case unix.SYS_CONNECT:
			unix.Connect(fd, sa)
		}
	}()
	record := fmt.Sprintf("/proc/self/task/%d/syscall", <-tids)
	for {
		b, err := os.ReadFile(record)
		if err != nil {
			return err
		}
		if strings.HasPrefix(string(b), strconv.Itoa(nr)+" ") {
			break
		}
		time.Sleep(time.Millisecond)
	}
	return unix.Close(fd)
}

func helperCmd(args ...string) *exec.Cmd {
	cmd := exec.Command(self, args...)
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	return cmd
}

// session is a started command with its input and a probe on it.
type session struct {
	cmd   *exec.Cmd
	probe *Probe
	input *os.File // pipe write end or PTY master
}

// startPipe starts cmd with a pipe as its stdin. Unless cmd has its own
// SysProcAttr, it gets a process group of its own, killed on cleanup.
func startPipe(t testing.TB, cmd *exec.Cmd) *session {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdin = r
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	err = cmd.Start()
	r.Close()
	if err != nil {
		w.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	killOnCleanup(t, cmd)
	probe, err := ForPipe(cmd.Process.Pid, w)
	if err != nil {
		t.Fatalf("ForPipe: %v", err)
	}
	t.Cleanup(func() { probe.Close() })
	return &session{cmd: cmd, probe: probe, input: w}
}

// startTerminal starts cmd as a session leader on a new terminal, whose
// master is non-blocking as the daemon's is.
func startTerminal(t testing.TB, cmd *exec.Cmd) *session {
	t.Helper()
	master, replica, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = replica, replica, replica
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setsid = true
	cmd.SysProcAttr.Setctty = true
	err = cmd.Start()
	replica.Close()
	if err != nil {
		master.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { master.Close() })
	killOnCleanup(t, cmd)
	probe, err := ForTerminal(cmd.Process.Pid, master)
	if err != nil {
		t.Fatalf("ForTerminal: %v", err)
	}
	t.Cleanup(func() { probe.Close() })
	return &session{cmd: cmd, probe: probe, input: master}
}

// killOnCleanup kills cmd's process group: it leads one, by Setpgid or
// Setsid, or is the init of a pid namespace, whose end ends the rest.
func killOnCleanup(t testing.TB, cmd *exec.Cmd) {
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Process.Kill()
		cmd.Wait()
	})
}

func (s *session) write(t testing.TB, line string) {
	t.Helper()
	if _, err := s.input.Write([]byte(line)); err != nil {
		t.Fatalf("write input: %v", err)
	}
}

// waitFor polls until Waiting reports want, for up to a few seconds.
func (s *session) waitFor(t testing.TB, want bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := s.probe.Waiting()
		if err != nil {
			t.Fatalf("Waiting: %v", err)
		}
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Waiting stayed %v for 5s, want %v", got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stays checks that Waiting keeps reporting want over a short while.
func (s *session) stays(t testing.TB, want bool) {
	t.Helper()
	for range 20 {
		got, err := s.probe.Waiting()
		if err != nil {
			t.Fatalf("Waiting: %v", err)
		}
		if got != want {
			t.Fatalf("Waiting = %v, want %v", got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

var starts = []struct {
	name  string
	start func(testing.TB, *exec.Cmd) *session
}{
	{"pipe", startPipe},
	{"terminal", startTerminal},
}

// backoffHelper reads its input in an event loop whose next timer is
// seconds off. With "once" it first waits 2 s for the answer to a
// datagram it sent, as a name lookup does, then waits on a timer 3 s off,
// again each time it falls due: the first is the backoff of a program
// retrying a call that failed, the ones after it timers of its own. With
// "retry" it makes an attempt of 0.5 s again after each backoff of 1.5 s,
// as a program retrying does, while another thread sleeps 250 ms after
// each attempt, as a Go runtime's monitor thread sleeps microseconds to
// milliseconds at a time once a system call returns: that is not the
// backoff. With "retry-held", the thread that retries also waits 100 ms
// on a pipe before each backoff, as a goroutine waits for a processor,
// until a third thread that slept as long writes to it. With "moved" the
// thread that waited 2 s on the network then waits on a channel, with no
// timeout, while the event loop of "once" runs on another thread, as a
// runtime moves a goroutine: that loop's first timer is the backoff. With
// "retry-pair" two threads wait on one socket in each attempt, and one
// datagram ends both: then the first waits on a pipe with no timeout,
// while the other retries after a backoff of 3 s and the thread that sent
// the datagram sleeps 600 ms. With none of these, its timer is its own.
func backoffHelper(mode string) error {
	// The attempt and the backoff on one thread, as in an event loop: Go
	// could move the goroutine between them.
	runtime.LockOSThread()
	attempted := func() error { return nil }
	if mode == "retry" || mode == "retry-held" {
		var err error
		if attempted, err = startNapper(250*time.Millisecond, -1); err != nil {
			return err
		}
	}
	if mode == "retry-held" {
		var p [2]int
		if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
			return err
		}
		napped := attempted
		wake, err := startNapper(100*time.Millisecond, p[1])
		if err != nil {
			return err
		}
		attempted = func() error {
			if err := napped(); err != nil {
				return err
			}
			if err := wake(); err != nil {
				return err
			}
			_, err := unix.Read(p[0], make([]byte, 1))
			return err
		}
		mode = "retry"
	}
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return err
	}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, 0, &unix.EpollEvent{Events: unix.EPOLLIN}); err != nil {
		return err
	}
	attempt := func(d time.Duration) error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if err := unix.Connect(fd, &unix.SockaddrInet4{Port: 9, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
			return err
		}
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for deadline := time.Now().Add(d); time.Now().Before(deadline); {
			if _, err := unix.Poll(pfd, int(time.Until(deadline).Milliseconds())+1); err != nil && err != unix.EINTR {
				return err
			}
		}
		return attempted()
	}
	switch mode {
	case "once":
		if err := attempt(2 * time.Second); err != nil {
			return err
		}
	case "retry":
		return awaitInput(epfd, 1500, func() error { return attempt(500 * time.Millisecond) })
	case "retry-pair":
		return pairBackoff(epfd)
	case "moved":
		var p [2]int
		if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
			return err
		}
		loop := make(chan error, 1)
		go func() {
			runtime.LockOSThread()
			if _, err := unix.Read(p[0], make([]byte, 1)); err != nil {
				loop <- err
				return
			}
			loop <- awaitInput(epfd, 3000, nil)
		}()
		if err := attempt(2 * time.Second); err != nil {
			return err
		}
		if _, err := unix.Write(p[1], []byte{0}); err != nil {
			return err
		}
		return <-loop
	}
	return awaitInput(epfd, 3000, nil)
}

// pairBackoff is backoffHelper's "retry-pair": this thread and the one
// that backs off wait on the network together, and the walk finds this
// one first.
func pairBackoff(epfd int) error {
	sock, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	if err := unix.Bind(sock, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		return err
	}
	addr, err := unix.Getsockname(sock)
	if err != nil {
		return err
	}
	var start, done, reply [2]int
	for _, p := range []*[2]int{&start, &done, &reply} {
		if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
			return err
		}
	}
	// Both wait until the datagram comes: it wakes both at once, so that
	// a check that finds one of them waiting on the network finds both.
	awaitReply := func() error {
		pfd := []unix.PollFd{{Fd: int32(sock), Events: unix.POLLIN}}
		for {
			n, err := unix.Poll(pfd, 2000)
			if err != nil && err != unix.EINTR {
				return err
			}
			if n != 0 {
				return nil
			}
		}
	}
	go func() {
		runtime.LockOSThread()
		b := make([]byte, 1)
		first, after := unix.NsecToTimespec((500 * time.Millisecond).Nanoseconds()), unix.NsecToTimespec((600 * time.Millisecond).Nanoseconds())
		for {
			if _, err := unix.Read(reply[0], b); err != nil && err != unix.EINTR {
				return
			}
			unix.Nanosleep(&first, nil)
			if err := unix.Sendto(sock, b, 0, addr); err != nil {
				return
			}
			unix.Nanosleep(&after, nil)
		}
	}()
	loop := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		b := make([]byte, 1)
		err := awaitInput(epfd, 3000, func() error {
			if _, err := unix.Write(start[1], b); err != nil {
				return err
			}
			if _, err := unix.Write(reply[1], b); err != nil {
				return err
			}
			if err := awaitReply(); err != nil {
				return err
			}
			// The datagram stays until the other thread saw it: taken
			// before, its poll would wait on.
			if _, err := unix.Read(done[0], b); err != nil {
				return err
			}
			_, _, err := unix.Recvfrom(sock, b, unix.MSG_DONTWAIT)
			return err
		})
		// Ends this thread's wait to start.
		unix.Close(start[1])
		loop <- err
	}()
	b := make([]byte, 1)
	for {
		n, err := unix.Read(start[0], b)
		if err != nil {
			return err
		}
		if n == 0 {
			return <-loop
		}
		if err := awaitReply(); err != nil {
			return err
		}
		if _, err := unix.Write(done[1], b); err != nil {
			return err
		}
	}
}

// awaitInput waits on epfd, which holds the input, wait ms at a time,
// calling retry first each time unless it is nil, then reads the input.
func awaitInput(epfd, wait int, retry func() error) error {
	var ev [1]unix.EpollEvent
	for {
		if retry != nil {
			if err := retry(); err != nil {
				return err
			}
		}
		n, err := unix.EpollWait(epfd, ev[:], wait)
		if err != nil && err != unix.EINTR {
			return err
		}
		if n > 0 {
			break
		}
	}
	if _, err := unix.Read(0, make([]byte, 4096)); err != nil {
		return err
	}
	time.Sleep(time.Hour)
	return nil
}

// startNapper starts a thread that sleeps for nap each time the returned
// function is called, then writes a byte to done unless it is -1, and
// otherwise waits on a pipe. It returns once the thread waits there: a
// thread of the session that can run makes it running, which the test's
// first checks would see.
func startNapper(nap time.Duration, done int) (func() error, error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return nil, err
	}
	tid := make(chan int, 1)
	go func() {
		runtime.LockOSThread()
		tid <- unix.Gettid()
		b := make([]byte, 1)
		ts := unix.NsecToTimespec(nap.Nanoseconds())
		for {
			if _, err := unix.Read(p[0], b); err != nil && err != unix.EINTR {
				return
			}
			unix.Nanosleep(&ts, nil)
			if done >= 0 {
				unix.Write(done, b)
			}
		}
	}()
	syscallFile := fmt.Sprintf("/proc/self/task/%d/syscall", <-tid)
	for {
		b, err := os.ReadFile(syscallFile)
		if err != nil {
			return nil, err
		}
		if bytes.HasPrefix(b, []byte(strconv.Itoa(unix.SYS_READ)+" ")) {
			break
		}
	}
	return func() error {
		_, err := unix.Write(p[1], []byte{0})
		return err
	}, nil
}

// keepaliveHelper reads its input while another thread waits on a futex
// with a timeout of 10 s, as an idle worker of a thread pool (tokio's
// blocking pool) waits to retire.
func keepaliveHelper() error {
	go func() {
		runtime.LockOSThread()
		var word uint32
		ts := unix.NsecToTimespec((10 * time.Second).Nanoseconds())
		for {
			unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(&word)), futexWait|futexPrivateFlag, 0, uintptr(unsafe.Pointer(&ts)), 0, 0)
		}
	}()
	if _, err := unix.Read(0, make([]byte, 4096)); err != nil {
		return err
	}
	time.Sleep(time.Hour)
	return nil
}

// checkUntil polls Check until it tells want, for up to a few seconds,
// then checks that it keeps telling it for 31 checks in a row, longer
// than TimerConfirm. A check that tells running once want was seen starts
// that over only if Explain, right after it, finds a task of the helper
// that can run: a helper's Go runtime still starts threads for a while
// after its main one began to wait, longer on a loaded host, and such a
// session is running whatever that one waits on. Running also means that
// every task is idle, which a misread wait would tell; since the task that
// could run may have blocked again before Explain looks, that is allowed
// maxUnexplained times, and fails after.
func (s *session) checkUntil(t testing.TB, want State) {
	t.Helper()
	const maxUnexplained = 3
	unexplained := 0
	deadline := time.Now().Add(5 * time.Second)
	for held := 0; held <= 30; time.Sleep(10 * time.Millisecond) {
		got, err := s.probe.Check()
		switch {
		case err != nil:
			t.Fatalf("Check: %v", err)
		case got == want:
			held++
		case held > 0 && got != Running:
			t.Fatalf("Check = %v after %d checks told %v", got, held, want)
		case held > 0:
			if st, tasks, runnable := s.runnable(t); !runnable {
				if unexplained++; unexplained > maxUnexplained {
					t.Fatalf("Check = %v after %d checks told %v, the %dth time with no task that can run; Explain = %v: %+v", got, held, want, unexplained, st, tasks)
				}
			}
			held = 0
		}
		if time.Now().After(deadline) {
			t.Fatalf("Check told %v last, and not %v 31 times in a row, in 5s", got, want)
		}
	}
}

// runnable says whether Explain finds a task of the session that can run.
func (s *session) runnable(t testing.TB) (State, []Task, bool) {
	t.Helper()
	st, tasks, err := s.probe.Explain()
	if err != nil {
		t.Fatalf("Explain: %v", err)
	}
	for _, task := range tasks {
		if task.Verdict == Busy {
			return st, tasks, true
		}
	}
	return st, tasks, false
}

// checkSees polls Check until it tells want, for up to a few seconds.
func (s *session) checkSees(t testing.TB, want State) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		got, err := s.probe.Check()
		if err != nil {
			t.Fatalf("Check: %v", err)
		}
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Check told %v for 5s, want %v", got, want)
		}
	}
}

// TestBackoffIsNotWaitingForInput: a program that reads its terminal while
// it waits out the backoff of seconds after a failed attempt on the
// network goes on by itself when the backoff ends: it waits, but not for
// input, for as long as it keeps retrying. A timer that falls due without
// another attempt after it was the program's own, and so is one without an
// attempt before it: it waits for input.
func TestBackoffIsNotWaitingForInput(t *testing.T) {
	for _, st := range starts {
		// Another thread's short sleep as the backoff begins is not the
		// backoff: the next attempt comes from the thread that made the
		// last.
		// Nor is it when the thread that retries waits a moment on
		// something else before its backoff.
		// Nor when another thread waited on the network with it and
		// waits on no timer after.
		for _, mode := range []string{"retry", "retry-held", "retry-pair"} {
			name := st.name
			if mode != "retry" {
				name += "/" + mode
			}
			// An attempt and its backoff take 2 s, and 3.5 s in the pair.
			checks := 4 * time.Second
			if mode == "retry-pair" {
				checks = 6 * time.Second
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				s := st.start(t, helperCmd("backoff", mode))
				// An attempt lasts 0.5 s, less than checkUntil's 31
				// checks can take on a loaded host; the once case holds
				// the network for longer.
				// Within checks come a backoff, then the next attempt: a
				// run that never saw them proves nothing of the backoff.
				s.checkSees(t, WaitingForNetwork)
				backedOff, retried := false, false
				for deadline := time.Now().Add(checks); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
					got, err := s.probe.Check()
					if err != nil || got == WaitingForInput {
						t.Fatalf("Check = %v, %v while it retries", got, err)
					}
					backedOff = backedOff || got == Waiting
					retried = retried || backedOff && got == WaitingForNetwork
				}
				if !retried {
					t.Fatalf("in %v of checks after the first attempt: backoff seen %v, the next attempt after it not", checks, backedOff)
				}
				s.write(t, "hello\n")
				s.waitFor(t, false)
			})
		}
		t.Run(st.name+"/once", func(t *testing.T) {
			t.Parallel()
			s := st.start(t, helperCmd("backoff", "once"))
			s.checkUntil(t, WaitingForNetwork)
			s.checkUntil(t, Waiting)
			s.checkUntil(t, WaitingForInput)
			s.write(t, "hello\n")
			s.waitFor(t, false)
		})
		// The task that waited on the network waits on no timer after
		// it: once it has not for TimerConfirm, the soonest timer of any
		// task is the backoff's end.
		t.Run(st.name+"/moved", func(t *testing.T) {
			t.Parallel()
			s := st.start(t, helperCmd("backoff", "moved"))
			s.checkUntil(t, WaitingForNetwork)
			s.checkUntil(t, Waiting)
			s.checkUntil(t, WaitingForInput)
			s.write(t, "hello\n")
			s.waitFor(t, false)
		})
		t.Run(st.name+"/without an attempt", func(t *testing.T) {
			t.Parallel()
			s := st.start(t, helperCmd("backoff"))
			s.checkUntil(t, WaitingForInput)
		})
	}
}

// TestPoolKeepAliveIsIdle: an idle worker's futex wait with a timeout of
// seconds lets nothing go on when it ends, so beside a task reading the
// input the session waits for input.
func TestPoolKeepAliveIsIdle(t *testing.T) {
	for _, st := range starts {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			s := st.start(t, helperCmd("keepalive"))
			s.checkUntil(t, WaitingForInput)
			s.write(t, "hello\n")
			s.waitFor(t, false)
		})
	}
}

func TestReadThenSleep(t *testing.T) {
	for _, st := range starts {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			s := st.start(t, exec.Command("sh", "-c", "read x; sleep 30"))
			s.waitFor(t, true)
			s.write(t, "hello\n")
			s.waitFor(t, false)
			s.stays(t, false)
		})
	}
}

// A daemon keeps a probe per session and its open-file limit bounds how
// many sessions it holds: probes share one /proc, and closing one leaves
// the others working.
func TestProbesHoldNoDescriptorOfTheirOwn(t *testing.T) {
	s := startPipe(t, exec.Command("sh", "-c", "read x; sleep 30"))
	s.waitFor(t, true)
	openFds := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	before := openFds()
	var probes []*Probe
	for range 20 {
		p, err := ForPipe(s.cmd.Process.Pid, s.input)
		if err != nil {
			t.Fatalf("ForPipe: %v", err)
		}
		probes = append(probes, p)
	}
	if after := openFds(); after != before {
		t.Errorf("20 probes took %d descriptors", after-before)
	}
	probes[0].Close()
	if _, err := probes[0].Check(); err == nil {
		t.Error("a closed probe checked without error")
	}
	for _, p := range probes[1:] {
		if st, err := p.Check(); err != nil || st != WaitingForInput {
			t.Fatalf("after another probe was closed: Check = %v, %v; want WaitingForInput", st, err)
		}
		p.Close()
	}
}

func TestTerminalMasterStaysNonBlocking(t *testing.T) {
	s := startTerminal(t, exec.Command("sh", "-c", "read x; sleep 30"))
	s.waitFor(t, true)
	raw, err := s.input.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var flags int
	var flagsErr error
	if err := raw.Control(func(fd uintptr) { flags, flagsErr = unix.FcntlInt(fd, unix.F_GETFL, 0) }); err != nil {
		t.Fatal(err)
	}
	if flagsErr != nil {
		t.Fatal(flagsErr)
	}
	if flags&unix.O_NONBLOCK == 0 {
		t.Fatal("the probe made the master blocking")
	}
}

func TestSystemCalls(t *testing.T) {
	for _, st := range starts {
		for _, mode := range waitModes {
			if st.name == "pipe" && strings.HasPrefix(mode, "devtty") {
				continue
			}
			t.Run(st.name+"/"+mode, func(t *testing.T) {
				t.Parallel()
				s := st.start(t, helperCmd(mode))
				s.waitFor(t, true)
				s.write(t, "hello\n")
				s.waitFor(t, false)
				s.stays(t, false)
			})
		}
	}
}

// TestTerminalBackgroundReader checks that a task blocked reading the
// terminal counts only while its group is the foreground one.
func TestTerminalBackgroundReader(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := helperCmd("background")
	cmd.ExtraFiles = []*os.File{w}
	s := startTerminal(t, cmd)
	w.Close()
	report := bufio.NewScanner(r)
	readPid := func() int {
		t.Helper()
		if !report.Scan() {
			t.Fatalf("helper reported nothing: %v", report.Err())
		}
		pid, err := strconv.Atoi(report.Text())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
		return pid
	}
	reader := readPid()
	s.waitFor(t, true)

	s.cmd.Process.Signal(syscall.SIGUSR1)
	readPid()
	s.waitFor(t, false)
	s.stays(t, false)
	// Without this the test would also pass if the reader had simply left
	// its read.
	sc, err := os.ReadFile(fmt.Sprintf("/proc/%d/syscall", reader))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(sc, []byte("0 ")) {
		t.Fatalf("background reader not blocked in read any more: %q", sc)
	}
}

// TestNamespaces runs the session in a child user and pid namespace, as a
// sandbox does: root is a helper that is pid 1 there, and the reader is its
// child, with other pids inside than outside. The poll and epoll readers
// have their memory and their epoll set inspected across the namespaces.
func TestNamespaces(t *testing.T) {
	readers := map[string][]string{
		"sh":         {"sh", "-c", "read x; sleep 30"},
		"poll":       {self, "poll"},
		"epoll_wait": {self, "epoll_wait"},
	}
	for _, st := range starts {
		for name, reader := range readers {
			t.Run(st.name+"/"+name, func(t *testing.T) {
				t.Parallel()
				testNamespaces(t, st.start, reader)
			})
		}
	}
}

func testNamespaces(t *testing.T, start func(testing.TB, *exec.Cmd) *session, reader []string) {
	cmd := helperCmd(append([]string{"spawn"}, reader...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
	}
	s := start(t, cmd)
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("NSpid:\t%d\t1\n", cmd.Process.Pid); !bytes.Contains(status, []byte(want)) {
		t.Fatalf("root is not the init of a child pid namespace: status has no %q", want)
	}
	s.waitFor(t, true)
	s.write(t, "hello\n")
	s.waitFor(t, false)
}

func TestBusyLoop(t *testing.T) {
	for _, st := range starts {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			s := st.start(t, exec.Command("sh", "-c", "read x; while :; do :; done"))
			s.waitFor(t, true)
			s.write(t, "hello\n")
			s.waitFor(t, false)
			s.stays(t, false)
		})
	}
}

// TestOddCommandName runs the reader under a name that fools a parser of
// /proc/PID/stat that stops at the first ')': it would take 2 for the
// process group.
func TestOddCommandName(t *testing.T) {
	odd := filepath.Join(t.TempDir(), "a) S 1 2 3 (b")
	if err := os.Symlink(self, odd); err != nil {
		t.Fatal(err)
	}
	for _, st := range starts {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			cmd := helperCmd("read")
			cmd.Path = odd
			s := st.start(t, cmd)
			s.waitFor(t, true)
			s.write(t, "hello\n")
			s.waitFor(t, false)
		})
	}
}

// TestUninspectableProcessIsSkipped needs a process of the session that the
// caller may not ptrace (root may ptrace every process): it is left out of
// the check rather than failing it, so the session's other processes are
// still seen.
func TestUninspectableProcessIsSkipped(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root may inspect every process; run as another user")
	}
	s := startPipe(t, helperCmd("spawn", self, "undumpable"))
	deadline := time.Now().Add(500 * time.Millisecond)
	for time.Now().Before(deadline) {
		if waiting, err := s.probe.Waiting(); err != nil || waiting {
			t.Fatalf("Waiting: %v, %v; want false, nil", waiting, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A task blocked reading a file another of its threads closed since
// waits on: it neither runs nor hides that the session waits for input.
func TestBlockedOnAClosedDescriptor(t *testing.T) {
	for _, st := range starts {
		t.Run(st.name, func(t *testing.T) {
			s := st.start(t, helperCmd("closed-fd", "read"))
			s.waitFor(t, true)
			// Explain's state may be Waiting, on a runtime thread's timer
			// it takes at once; its evidence names the closed file.
			_, tasks, err := s.probe.Explain()
			if err != nil {
				t.Fatal(err)
			}
			if v, ok := closedFile(tasks); !ok || v != Idle {
				t.Errorf("no task waits on a closed file: %+v", tasks)
			}
		})
	}
}

// A connect or a recv on a socket another thread closed still ends when
// the network answers: the session does not wait for input while it
// waits, though another thread reads the input.
func TestNetworkCallOnAClosedDescriptor(t *testing.T) {
	for _, tc := range []struct {
		call string
		want Verdict
	}{
		{"connect", Network},
		// Any answer, or none.
		{"recv", Busy},
	} {
		t.Run(tc.call, func(t *testing.T) {
			s := startPipe(t, helperCmd("closed-fd", tc.call))
			deadline := time.Now().Add(5 * time.Second)
			for {
				_, tasks, err := s.probe.Explain()
				if err != nil {
					t.Fatal(err)
				}
				v, closed := closedFile(tasks)
				if closed && slices.ContainsFunc(tasks, func(t Task) bool { return t.Verdict == Input }) {
					if v != tc.want {
						t.Errorf("the closed socket's verdict is %v, want %v: %+v", v, tc.want, tasks)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no task on a closed file beside one reading the input in 5s: %+v", tasks)
				}
				time.Sleep(10 * time.Millisecond)
			}
			s.stays(t, false)
		})
	}
}

// closedFile is the verdict of the first closed file among the tasks'.
func closedFile(tasks []Task) (Verdict, bool) {
	for _, task := range tasks {
		for _, f := range task.Files {
			if f.Kind == "closed" {
				return f.Verdict, true
			}
		}
	}
	return Idle, false
}

func TestClosed(t *testing.T) {
	s := startPipe(t, exec.Command("sh", "-c", "read x"))
	s.waitFor(t, true)
	if err := s.probe.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.probe.Waiting(); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("Waiting after Close: %v, want os.ErrClosed", err)
	}
}

func TestVanishedRoot(t *testing.T) {
	s := startPipe(t, exec.Command("sh", "-c", "read x"))
	s.waitFor(t, true)
	s.cmd.Process.Kill()
	s.cmd.Wait()
	s.waitFor(t, false)
}

// BenchmarkWaiting measures one check: of a session whose one process is
// reading, and of one whose eight children sleep (the whole tree walked).
func BenchmarkWaiting(b *testing.B) {
	tree := "for i in 1 2 3 4 5 6 7 8; do sleep 60 & done; wait"
	for _, st := range starts {
		b.Run(st.name+"/reading", func(b *testing.B) {
			s := st.start(b, exec.Command("sh", "-c", "read x"))
			s.waitFor(b, true)
			benchWaiting(b, s, true)
		})
		b.Run(st.name+"/tree", func(b *testing.B) {
			s := st.start(b, exec.Command("sh", "-c", tree))
			childrenFile := fmt.Sprintf("/proc/%d/task/%[1]d/children", s.cmd.Process.Pid)
			for deadline := time.Now().Add(5 * time.Second); ; {
				c, _ := os.ReadFile(childrenFile)
				if len(strings.Fields(string(c))) == 8 {
					break
				}
				if time.Now().After(deadline) {
					b.Fatalf("no 8 children: %q", c)
				}
				time.Sleep(10 * time.Millisecond)
			}
			benchWaiting(b, s, false)
		})
	}
}

func benchWaiting(b *testing.B, s *session, want bool) {
	b.ReportAllocs()
	for b.Loop() {
		got, err := s.probe.Waiting()
		if err != nil {
			b.Fatal(err)
		}
		if got != want {
			b.Fatalf("Waiting = %v, want %v", got, want)
		}
	}
}

// Once a probe has found the kernel's children files, the next is made
// without looking its root up in /proc (a walk down to the task, for each
// launch): a root gone by then is running to the checks, as before its
// end was noticed, or gone (fs.ErrNotExist), never waiting.
func TestProbeOfAGoneRootEndsAtItsFirstCheck(t *testing.T) {
	s := startPipe(t, exec.Command("sh", "-c", "read x"))
	s.waitFor(t, true)
	pid := s.cmd.Process.Pid
	s.cmd.Process.Kill()
	s.cmd.Wait()
	p, err := ForPipe(pid, s.input)
	if err != nil {
		t.Fatalf("ForPipe of a gone root after a probe found the children files: %v", err)
	}
	defer p.Close()
	if st, err := p.Check(); err != nil && !errors.Is(err, fs.ErrNotExist) || err == nil && st != Running {
		t.Fatalf("Check of a gone root: %v, %v; want Running, or fs.ErrNotExist", st, err)
	}
}

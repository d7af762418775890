package launcherlinux

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/launcher"
	"golang.org/x/sys/unix"
)

// The environment of the test binary run inside a sandbox as the connect
// probe.
const (
	envConnectProbe = "SANDBOXD_TEST_CONNECT_PROBE"
	envOtherSocket  = "SANDBOXD_TEST_OTHER_SOCKET"
	envOtherSession = "SANDBOXD_TEST_OTHER_SESSION"
)

// connectProbe runs inside a sandbox and prints, one "name=outcome" line
// each, what its connects and sockets got: "ok" or an errno name.
func connectProbe(mode string) {
	if mode == "hang" {
		hangProbe()
	}
	report := func(name string, err error) { fmt.Printf("%s=%s\n", name, outcome(err)) }
	report("session-dial", echo(func() (net.Conn, error) { return net.Dial("unix", SessionSocketPath) }))
	report("session-blocking", blockingEcho(SessionSocketPath))
	report("session-other-thread", onOtherThread(func() error { return blockingEcho(SessionSocketPath) }))
	_, err := net.Dial("unix", os.Getenv(envOtherSocket))
	report("other-unix", err)
	_, err = net.Dial("unix", os.Getenv(envOtherSession))
	report("other-session", err)
	_, err = net.Dial("unix", "@sandboxd-test-abstract")
	report("abstract-unix", err)
	// The same socket file by a relative path: only the absolute one is
	// the session socket's.
	err = os.Chdir("/dev")
	if err == nil {
		_, err = net.Dial("unix", "sandboxd.sock")
	}
	report("session-relative", err)
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM, 0)
	if err == nil {
		unix.Close(fd)
	}
	report("unix-dgram", err)
	fd, err = unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 1)
	if err == nil {
		unix.Close(fd)
	}
	report("unix-stream-protocol-1", err)
	_, err = net.Dial("tcp", "127.0.0.1:1")
	report("tcp-nothing-listening", err)
	report("tcp-blocking-nothing-listening", blockingTCP(1))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err == nil {
		go func() {
			for {
				c, err := lis.Accept()
				if err != nil {
					return
				}
				go func() { io.Copy(c, c); c.Close() }()
			}
		}()
		addr := lis.Addr().String()
		report("tcp-loopback", echo(func() (net.Conn, error) { return net.Dial("tcp", addr) }))
		report("tcp-blocking-loopback", blockingTCP(lis.Addr().(*net.TCPAddr).Port))
	} else {
		report("tcp-loopback", err)
	}
	var st unix.Stat_t
	err = unix.Lstat(SessionSocketPath, &st)
	if err == nil && st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		err = fmt.Errorf("mode %o", st.Mode)
	}
	report("session-socket-file", err)
	entries, err := os.ReadDir(filepath.Dir(os.Getenv(envOtherSession)))
	if err == nil && len(entries) > 0 {
		err = fmt.Errorf("lists %d entries, %s first", len(entries), entries[0].Name())
	}
	report("sessions-dir-hidden", err)
	os.Exit(0)
}

// hangProbe leaves one blocking connect hanging on a listener whose backlog
// is full, then shows that another connect still gets through, and waits
// to be killed. It names the listener's fd first, for the test to hold on
// to: SYNs to it are then dropped for minutes, even after the sandbox is
// gone.
func hangProbe() {
	lfd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if err == nil {
		err = unix.Bind(lfd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}})
	}
	if err == nil {
		err = unix.Listen(lfd, 0)
	}
	var bound unix.Sockaddr
	if err == nil {
		bound, err = unix.Getsockname(lfd)
	}
	if err != nil {
		fmt.Println("listen:", err)
		os.Exit(2)
	}
	port := bound.(*unix.SockaddrInet4).Port
	fmt.Printf("listener-fd=%d\n", lfd)
	// A backlog of 0 takes one connection; further SYNs are dropped and
	// retried for minutes.
	for i := 0; i < 2; i++ {
		fd, _ := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK, 0)
		unix.Connect(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}, Port: port})
	}
	time.Sleep(100 * time.Millisecond)
	started := make(chan struct{})
	go func() {
		close(started)
		fmt.Printf("hung-connect-returned=%s\n", outcome(blockingTCP(port)))
	}()
	<-started
	time.Sleep(300 * time.Millisecond)
	fmt.Printf("session-while-blocked=%s\n", outcome(echo(func() (net.Conn, error) { return net.Dial("unix", SessionSocketPath) })))
	time.Sleep(time.Hour)
}

func outcome(err error) string {
	if err == nil {
		return "ok"
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return unix.ErrnoName(errno)
	}
	return strings.ReplaceAll(err.Error(), "\n", " ")
}

// echo sends one byte on a connection dial makes and wants it back plus one.
func echo(dial func() (net.Conn, error)) error {
	c, err := dial()
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte{'a'}); err != nil {
		return err
	}
	b := make([]byte, 1)
	if _, err := io.ReadFull(c, b); err != nil {
		return err
	}
	if b[0] != 'b' && b[0] != 'a' {
		return fmt.Errorf("echo %q", b)
	}
	return nil
}

// blockingEcho is echo on a blocking socket, whose connect waits in the
// kernel rather than returning EINPROGRESS.
func blockingEcho(path string) error {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Connect(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		return err
	}
	if _, err := unix.Write(fd, []byte{'a'}); err != nil {
		return err
	}
	b := make([]byte, 1)
	if n, err := unix.Read(fd, b); err != nil || n != 1 || b[0] != 'b' {
		return fmt.Errorf("read %d %q: %v", n, b, err)
	}
	return nil
}

func blockingTCP(port int) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Connect(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}, Port: port})
}

// onOtherThread runs f on a thread that is not the thread group leader,
// whose notifications carry a thread id rather than the process id.
func onOtherThread(f func() error) error {
	for {
		done := make(chan error, 1)
		isLeader := make(chan bool, 1)
		go func() {
			runtime.LockOSThread()
			if unix.Gettid() == unix.Getpid() {
				// Keep the leader busy so the next try lands elsewhere.
				isLeader <- true
				select {}
			}
			isLeader <- false
			done <- f()
		}()
		if !<-isLeader {
			return <-done
		}
	}
}

// sessionFixture is what a daemon would set up for a session that may have
// children: the main socket, a directory of session sockets (this
// session's and another's), and a world-reachable socket of some other
// host service.
type sessionFixture struct {
	mainSocket, sessionsDir, session, otherSession, otherSocket string
	// accepted counts the connections to this session's socket.
	accepted atomic.Int32
	// probe is a copy of this test binary that the sandbox can run.
	probe string
}

func newSessionFixture(t *testing.T) *sessionFixture {
	t.Helper()
	uid, gid := sandboxIdentity()
	f := &sessionFixture{}
	mainDir := hostDir(t, 0o755)
	f.mainSocket = filepath.Join(mainDir, "sandboxd.sock")
	f.sessionsDir = filepath.Join(mainDir, "sessions")
	if err := os.Mkdir(f.sessionsDir, 0o711); err != nil {
		t.Fatal(err)
	}
	os.Chmod(f.sessionsDir, 0o711)
	f.session = filepath.Join(f.sessionsDir, "s1.sock")
	f.otherSession = filepath.Join(f.sessionsDir, "s2.sock")
	f.otherSocket = filepath.Join(hostDir(t, 0o755), "service.sock")
	for _, s := range []struct {
		path string
		mode os.FileMode
		echo bool
	}{{f.mainSocket, 0o660, false}, {f.session, 0o600, true}, {f.otherSession, 0o600, false}, {f.otherSocket, 0o666, false}} {
		lis, err := net.Listen("unix", s.path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { lis.Close() })
		os.Chmod(s.path, s.mode)
		if os.Getuid() == 0 && s.mode == 0o600 {
			os.Chown(s.path, int(uid), int(gid))
		}
		go f.serve(lis, s.echo)
	}
	// The sandbox runs this test binary, which the sandbox uid must be
	// able to execute from outside the private /tmp.
	f.probe = filepath.Join(hostDir(t, 0o755), "probe")
	self, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.probe, self, 0o755); err != nil {
		t.Fatal(err)
	}
	return f
}

// serve answers each byte on this session's socket with the next byte;
// the other sockets accept and close, so reaching them shows as success.
func (f *sessionFixture) serve(lis net.Listener, echo bool) {
	for {
		c, err := lis.Accept()
		if err != nil {
			return
		}
		if echo {
			f.accepted.Add(1)
		}
		go func() {
			defer c.Close()
			b := make([]byte, 1)
			for echo {
				if _, err := c.Read(b); err != nil {
					return
				}
				b[0]++
				c.Write(b)
			}
		}()
	}
}

func (f *sessionFixture) spec(t *testing.T, mode sandboxdv1.Network_Mode, probeMode string) launcher.Spec {
	spec := testSpec(t, &sandboxdv1.Policy{
		Network:  &sandboxdv1.Network{Mode: mode},
		Children: &sandboxdv1.Children{Allow: true},
	}, f.probe, "-test.run=^$")
	spec.Env = append(spec.Env, envConnectProbe+"="+probeMode, envOtherSocket+"="+f.otherSocket, envOtherSession+"="+f.otherSession)
	spec.HideSockets = []string{f.mainSocket, f.sessionsDir}
	spec.SessionSocket = f.session
	return spec
}

// runProbe runs the connect probe and returns its lines as a map.
func runConnectProbe(t *testing.T, spec launcher.Spec) (map[string]string, launcher.Process) {
	t.Helper()
	out, serr, p, st, err := runSpec(t, newBackend(t), spec)
	if err != nil || st.ExitCode != 0 || st.Signal != 0 {
		t.Fatalf("probe: %+v, %v\nstdout:\n%s\nstderr:\n%s", st, err, out, serr)
	}
	t.Logf("probe:\n%s%s", out, serr)
	return probeLines(out), p
}

func probeLines(s string) map[string]string {
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			got[k] = v
		}
	}
	return got
}

func wantProbe(t *testing.T, got, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
}

func enforcementOf(p launcher.Process, field string) string {
	for _, e := range p.Enforcement().GetFields() {
		if e.GetField() == field {
			return e.GetMechanism()
		}
	}
	return ""
}

// noSupervisorLeft fails if a goroutine of a notification supervisor
// outlived the Wait that should have ended it.
func noSupervisorLeft(t *testing.T) {
	t.Helper()
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	if bytes.Contains(buf, []byte("(*supervisor)")) {
		t.Errorf("supervisor goroutines left after Wait:\n%s", buf)
	}
}

func openFds(t *testing.T) int {
	names, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(names)
}

func TestSessionSocketWithNetworkNoneReachesOnlyTheSessionSocket(t *testing.T) {
	f := newSessionFixture(t)
	spec := f.spec(t, sandboxdv1.Network_NONE, "all")
	// The first launch of a kind starts the backend's spawners and the
	// inits it keeps started ahead for that kind, whose descriptors stay:
	// run alone, the count before would not have them.
	runConnectProbe(t, spec)
	f.accepted.Store(0)
	fds := openFds(t)
	got, p := runConnectProbe(t, spec)
	wantProbe(t, got, map[string]string{
		"session-dial":                   "ok",
		"session-blocking":               "ok",
		"session-other-thread":           "ok",
		"other-unix":                     "ECONNREFUSED",
		"other-session":                  "ECONNREFUSED",
		"abstract-unix":                  "ECONNREFUSED",
		"session-relative":               "ECONNREFUSED",
		"unix-dgram":                     "EPERM",
		"unix-stream-protocol-1":         "EPERM",
		"tcp-nothing-listening":          "ECONNREFUSED",
		"tcp-blocking-nothing-listening": "ECONNREFUSED",
		"tcp-loopback":                   "ok",
		"tcp-blocking-loopback":          "ok",
		"session-socket-file":            "ok",
	})
	if !strings.HasPrefix(got["sessions-dir-hidden"], "E") {
		t.Errorf("sessions directory: %q, want it unlistable or empty", got["sessions-dir-hidden"])
	}
	if n := f.accepted.Load(); n != 3 {
		t.Errorf("the session socket accepted %d connections, want 3", n)
	}
	for field, want := range map[string]string{"network.mode": "seccomp user notification", "children.allow": SessionSocketPath} {
		if m := enforcementOf(p, field); !strings.Contains(m, want) {
			t.Errorf("enforcement of %s: %q, want it to mention %q", field, m, want)
		}
	}
	noSupervisorLeft(t)
	if n := openFds(t); n != fds {
		t.Errorf("%d fds open after the session, %d before", n, fds)
	}
}

func TestSessionSocketWithNetworkHost(t *testing.T) {
	f := newSessionFixture(t)
	got, p := runConnectProbe(t, f.spec(t, sandboxdv1.Network_HOST, "all"))
	wantProbe(t, got, map[string]string{
		"session-dial":         "ok",
		"session-blocking":     "ok",
		"session-other-thread": "ok",
		// Network HOST: every host socket the sandbox may open is its
		// to reach, but not the daemon's others.
		"other-unix":          "ok",
		"session-socket-file": "ok",
		"unix-dgram":          "ok",
	})
	if v := got["other-session"]; v == "ok" {
		t.Errorf("another session's socket was reachable")
	}
	if !strings.HasPrefix(got["sessions-dir-hidden"], "E") {
		t.Errorf("sessions directory: %q, want it unlistable or empty", got["sessions-dir-hidden"])
	}
	if m := enforcementOf(p, "children.allow"); !strings.Contains(m, SessionSocketPath) {
		t.Errorf("enforcement of children.allow: %q", m)
	}
}

func TestNoSessionSocketWithoutChildren(t *testing.T) {
	for _, mode := range []sandboxdv1.Network_Mode{sandboxdv1.Network_NONE, sandboxdv1.Network_HOST} {
		out, serr, st := run(t, &sandboxdv1.Policy{Network: &sandboxdv1.Network{Mode: mode}}, "/bin/sh", "-c", "test -e "+SessionSocketPath+" && echo present || echo absent")
		if st.ExitCode != 0 || strings.TrimSpace(out) != "absent" {
			t.Errorf("network %v: %q %q %+v, want %s absent", mode, out, serr, st, SessionSocketPath)
		}
	}
}

// TestConnectSupervisorStopsWithTheSandbox: a connect left hanging by a
// full backlog neither holds up the others nor the end of the session.
func TestConnectSupervisorStopsWithTheSandbox(t *testing.T) {
	f := newSessionFixture(t)
	spec := f.spec(t, sandboxdv1.Network_NONE, "hang")
	outR, outW, _ := os.Pipe()
	spec.Stdio.Stdout = outW
	p, err := newBackend(t).Start(context.Background(), spec)
	outW.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer outR.Close()
	r := bufio.NewReader(outR)
	var lines []string
	for len(lines) < 2 {
		line, err := r.ReadString('\n')
		if err != nil {
			break
		}
		lines = append(lines, strings.TrimSpace(line))
	}
	got := probeLines(strings.Join(lines, "\n"))
	held, err := holdFd(p.Pid(), got["listener-fd"])
	if err != nil || got["session-while-blocked"] != "ok" {
		p.Kill()
		p.Wait()
		t.Fatalf("while a connect hangs: %q, %v", lines, err)
	}
	p.Kill()
	waited := make(chan struct{})
	go func() { p.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(5 * time.Second):
		t.Error("Wait hangs while a connect of the sandbox hangs")
	}
	// Without its listener the hanging connect ends at the next SYN.
	unix.Close(held)
	<-waited
	noSupervisorLeft(t)
}

// holdFd takes a duplicate of fd of the sandbox's command, the child of
// its init initPid.
func holdFd(initPid int, fd string) (int, error) {
	n, err := strconv.Atoi(fd)
	if err != nil {
		return -1, fmt.Errorf("fd %q: %w", fd, err)
	}
	kids, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", initPid, initPid))
	if err != nil {
		return -1, err
	}
	var kid int
	if _, err := fmt.Sscanf(string(kids), "%d ", &kid); err != nil || strings.Count(string(kids), " ") != 1 {
		return -1, fmt.Errorf("init %d has children %v", initPid, kids)
	}
	pidfd, err := unix.PidfdOpen(kid, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(pidfd)
	return unix.PidfdGetfd(pidfd, n, 0)
}

func TestSessionSocketInATerminalSession(t *testing.T) {
	f := newSessionFixture(t)
	out := runTerminal(t, newBackend(t), f.spec(t, sandboxdv1.Network_NONE, "all"))
	got := probeLines(strings.ReplaceAll(out, "\r", ""))
	wantProbe(t, got, map[string]string{"session-dial": "ok", "other-unix": "ECONNREFUSED"})
}

func TestLandlockSetRefusesChildren(t *testing.T) {
	b := landlockBackend(t)
	f := newSessionFixture(t)
	for _, mode := range []sandboxdv1.Network_Mode{sandboxdv1.Network_NONE, sandboxdv1.Network_HOST} {
		p, err := b.Start(context.Background(), f.spec(t, mode, "all"))
		wantRefusal(t, p, err, "children.allow")
		// The daemon's socket without the policy saying so is refused all
		// the same: it is what the sandbox would be handed.
		spec := f.spec(t, mode, "all")
		spec.Policy.Children.Allow = false
		p, err = b.Start(context.Background(), spec)
		wantRefusal(t, p, err, "children.allow")
	}
}

func TestReadTaskStatus(t *testing.T) {
	got := make(chan [2]int)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		st, err := readTaskStatus(unix.Gettid())
		if err != nil {
			t.Error(err)
		}
		if st.nsTid != unix.Gettid() || st.nsTgid != os.Getpid() {
			t.Errorf("in its own pid namespace, thread %d of %d reads as %+v", unix.Gettid(), os.Getpid(), st)
		}
		got <- [2]int{unix.Gettid(), st.tgid}
	}()
	r := <-got
	if r[1] != os.Getpid() {
		t.Errorf("thread %d: thread group %d, want %d", r[0], r[1], os.Getpid())
	}
	if _, err := readTaskStatus(1 << 30); err == nil {
		t.Error("no error for a thread that does not exist")
	}
}

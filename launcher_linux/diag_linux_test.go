package launcherlinux

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"golang.org/x/sys/unix"
)

// envListen makes TestSockDiagIsMadeAtNeedInTheSandboxsNamespace's
// sandboxed copy of the test binary listen on a unix socket at its path.
const envListen = "SANDBOXD_TEST_LISTEN"

// A root daemon holds no sock_diag socket for an idle session: it makes
// one in the sandbox's network namespace when the sandbox first connects
// by path, and a listener of the daemon's own namespace is then not the
// sandbox's. A rootless daemon, which may not enter the namespace, keeps
// the one the init sent. A listener of the sandbox's is its own by the
// file it is bound to, whole: sock_diag's inode number is cut to 32 bits.
func TestSockDiagIsMadeAtNeedInTheSandboxsNamespace(t *testing.T) {
	if path := os.Getenv(envListen); path != "" {
		l, err := net.Listen("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		fmt.Println("listening")
		time.Sleep(time.Minute)
		return
	}
	b := backendFor(t, SetNamespaces)
	exe, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	w := hostDir(t, 0o777)
	copied := w + "/launcher.test"
	if err := os.WriteFile(copied, exe, 0o755); err != nil {
		t.Fatal(err)
	}
	own := w + "/own.sock"
	spec := testSpec(t, &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{w}}}, copied, "-test.run=^TestSockDiagIsMadeAtNeedInTheSandboxsNamespace$")
	spec.Env = append(spec.Env, envListen+"="+own)
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer outR.Close()
	spec.Stdio.Stdout = outW
	p, err := b.Start(context.Background(), spec)
	outW.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		p.Kill()
		p.Wait()
	}()
	if line, err := bufio.NewReader(outR).ReadString('\n'); line != "listening\n" {
		t.Fatalf("the sandbox printed %q (%v), want it listening", line, err)
	}
	s := p.(*process).supervisor
	if s == nil || s.sharedNetNS {
		t.Skip("this session has no supervision of its own network namespace")
	}
	s.diagMu.Lock()
	diag, atNeed := s.diag, s.openDiag != nil
	s.diagMu.Unlock()
	if os.Geteuid() != 0 {
		if diag < 0 || atNeed {
			t.Errorf("a rootless daemon's session: sock_diag %d, made at need %v; want the init's", diag, atNeed)
		}
	} else if diag >= 0 || !atNeed {
		t.Fatalf("an idle session holds sock_diag socket %d (made at need: %v)", diag, atNeed)
	}
	path := filepath.Join(hostDir(t, 0o755), "host.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	if s.ownListener(st.Dev, st.Ino) {
		t.Error("a listener of the daemon's network namespace passed for the sandbox's own")
	}
	s.diagMu.Lock()
	diag = s.diag
	s.diagMu.Unlock()
	if diag < 0 {
		t.Fatal("no sock_diag socket once the sandbox needed one")
	}
	daemonThreadsInTheirNamespace(t)
	if err := unix.Stat(own, &st); err != nil {
		t.Fatal(err)
	}
	if !s.ownListener(st.Dev, st.Ino) {
		t.Error("a listener of the sandbox's network namespace was not found its own")
	}
	if s.ownListener(st.Dev, st.Ino+1<<32) {
		t.Error("a file whose inode number matches the sandbox's listener's in its low 32 bits passed for the listener's")
	}
	daemonThreadsInTheirNamespace(t)
	p.Kill()
	p.Wait()
	if s.ownListener(st.Dev, st.Ino) {
		t.Error("a listener passed for the sandbox's own once its init had ended")
	}
}

// daemonThreadsInTheirNamespace fails unless every thread of the test is
// in its network namespace, once the threads that entered the sandbox's
// have ended with their goroutines (a thread ends just after its
// goroutine's last send).
func daemonThreadsInTheirNamespace(t *testing.T) {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	want, err := os.Readlink("/proc/thread-self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	var stray []string
	for range 100 {
		stray = stray[:0]
		tasks, _ := os.ReadDir("/proc/self/task")
		for _, task := range tasks {
			if ns, err := os.Readlink("/proc/self/task/" + task.Name() + "/ns/net"); err == nil && ns != want {
				stray = append(stray, task.Name()+": "+ns)
			}
		}
		if len(stray) == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("threads of the daemon in another network namespace than its %s: %q", want, stray)
}

// A thread that entered another network namespace and cannot go back
// (here, it gave up CAP_SYS_ADMIN there) is logged and left locked, so
// that it ends with its goroutine: the runtime never runs another
// goroutine on it in the other namespace. It is never the process's first
// thread, which the runtime would park there for good instead; the
// goroutine lands on that one now and then, so the test strands several.
func TestSockDiagThreadThatCannotGoBackIsLoggedAndEnds(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a network namespace and enter it")
	}
	cmd := exec.Command("/bin/sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWNET}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	pidfd, err := unix.PidfdOpen(cmd.Process.Pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pidfd)
	for range 16 {
		logs := &logLines{}
		tid := 0
		err = inNetNS(pidfd, logs.logf, func() error {
			tid = unix.Gettid()
			hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
			var caps [2]unix.CapUserData
			if err := unix.Capget(&hdr, &caps[0]); err != nil {
				return err
			}
			caps[0].Effective &^= 1 << unix.CAP_SYS_ADMIN
			return unix.Capset(&hdr, &caps[0])
		})
		if err != nil {
			t.Fatal(err)
		}
		if tid == os.Getpid() {
			t.Fatal("the process's first thread entered the other namespace")
		}
		if l := logs.get(); len(l) != 1 || !strings.Contains(l[0], fmt.Sprintf("thread %d cannot go back to the daemon's network namespace", tid)) {
			t.Fatalf("logged %q, want thread %d's failure to go back", l, tid)
		}
		task := fmt.Sprintf("/proc/self/task/%d", tid)
		for i := 0; ; i++ {
			if _, err := os.Lstat(task); err != nil {
				break
			}
			if i == 100 {
				ns, _ := os.Readlink(task + "/ns/net")
				t.Fatalf("thread %d, which could not go back, still runs, in network namespace %s", tid, ns)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	daemonThreadsInTheirNamespace(t)
}

// Only the kernel's refusal to enter the namespace (EPERM) makes every
// session keep its init's socket: a failure of one session's (its init
// gone, no descriptor left) decides nothing. Once decided, no later
// session tries again.
func TestSockDiagModeIsDecidedByEPERMAlone(t *testing.T) {
	fail := func(err error) func() (int, error) { return func() (int, error) { return -1, err } }
	// never is a try that a decided mode must not make; it would keep
	// whatever was decided.
	never := func(decided string) func() (int, error) {
		return func() (int, error) {
			t.Errorf("a mode decided for %s tried again", decided)
			return -1, unix.EPERM
		}
	}
	var m diagMode
	for _, err := range []error{unix.ESRCH, unix.EMFILE, unix.EAGAIN} {
		if m.decide(fail(err)) {
			t.Errorf("%v: made at need", err)
		}
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !m.decide(func() (int, error) { return fd, nil }) || !m.decide(never("making them at need")) {
		t.Error("a socket made after other failures did not decide for making them at need")
	}
	var kept diagMode
	if kept.decide(fail(fmt.Errorf("enter: %w", unix.EPERM))) || kept.decide(never("keeping the init's")) {
		t.Error("EPERM did not decide for keeping the init's")
	}
}

package launcherlinux

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// A root daemon holds no sock_diag socket for an idle session: it makes
// one in the sandbox's network namespace when the sandbox first connects
// by path, and a listener of the daemon's own namespace is then not the
// sandbox's. A rootless daemon, which may not enter the namespace, keeps
// the one the init sent.
func TestSockDiagIsMadeAtNeedInTheSandboxsNamespace(t *testing.T) {
	b := backendFor(t, SetNamespaces)
	p, err := b.Start(context.Background(), testSpec(t, nil, "/bin/sleep", "60"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		p.Kill()
		p.Wait()
	}()
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
		return
	}
	if diag >= 0 || !atNeed {
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
	own := filepath.Join(filepath.Dir(path), "own.sock")
	listened := make(chan error, 1)
	go func() {
		// The thread stays in the sandbox's namespace and ends with this
		// goroutine.
		runtime.LockOSThread()
		var err error
		if cerr := p.(*process).proc.rc.Control(func(pidfd uintptr) { err = unix.Setns(int(pidfd), unix.CLONE_NEWNET) }); cerr != nil {
			err = cerr
		}
		if err == nil {
			var l net.Listener
			if l, err = net.Listen("unix", own); err == nil {
				t.Cleanup(func() { l.Close() })
			}
		}
		listened <- err
	}()
	if err := <-listened; err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat(own, &st); err != nil {
		t.Fatal(err)
	}
	if !s.ownListener(st.Dev, st.Ino) {
		t.Error("a listener of the sandbox's network namespace was not found its own")
	}
}

package launcherlinux

import (
	"bytes"
	"context"
	"runtime"
	"testing"
	"time"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/internal/fdwait/fdwaittest"
	"github.com/sandboxd/sandboxd/launcher"
)

// An idle sandbox costs the daemon no goroutine: neither its seccomp
// supervision nor the wait for its end keeps one parked, and the end,
// when it comes, still reaches whoever asked for it.
func TestIdleSandboxHoldsNoGoroutine(t *testing.T) {
	spec := testSpec(t, &sandboxdv1.Policy{Network: &sandboxdv1.Network{Mode: sandboxdv1.Network_NONE}}, "sleep", "1000")
	p, err := newBackend(t).Start(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if p.(*process).supervisor == nil {
		t.Skip("no seccomp supervision on this host")
	}
	ended := make(chan struct{})
	if err := p.(launcher.ExitNotifier).NotifyExit(func() { close(ended) }); err != nil {
		p.Kill()
		p.Wait()
		t.Fatal(err)
	}
	// The loop may still run for what the sandbox's start was notified of.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		if !bytes.Contains(buf, []byte("(*supervisor)")) && !bytes.Contains(buf, []byte("(*process).Wait")) {
			break
		}
		if time.Now().After(deadline) {
			p.Kill()
			p.Wait()
			t.Fatalf("goroutines still wait on an idle sandbox after 30s:\n%s", buf)
		}
	}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	<-ended
	if st, err := p.Wait(); err != nil || st.Signal == 0 {
		t.Fatalf("Wait after the end = %+v, %v; want killed", st, err)
	}
	noSupervisorLeft(t)
}

// An idle sandbox's pidfd, seccomp listener and report pipe stay out of
// the runtime's poller, which keeps 512 bytes for every file it has held
// at once: the listener waits in the shared waiter only, the pidfd and the
// report, read in the poller while the sandbox was set up, nowhere until
// the wait for the end.
func TestIdleSandboxStaysOutOfThePoller(t *testing.T) {
	spec := testSpec(t, &sandboxdv1.Policy{Network: &sandboxdv1.Network{Mode: sandboxdv1.Network_NONE}}, "sleep", "1000")
	p, err := newBackend(t).Start(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		p.Kill()
		p.Wait()
		noSupervisorLeft(t)
	}()
	sv := p.(*process).supervisor
	if sv == nil {
		t.Skip("no seccomp supervision on this host")
	}
	pidfd, listener := fdwaittest.FD(t, p.(*process).proc.pidfd), fdwaittest.FD(t, sv.listener)
	if n := fdwaittest.EpollsHolding(t, fdwaittest.FD(t, p.(*process).reportFile)); n != 0 {
		t.Fatalf("the idle sandbox's report pipe is in %d epoll instances, want none", n)
	}
	// The receive loop may still run for what the sandbox's start was
	// notified of; once it rests, the listener is the waiter's alone.
	for deadline := time.Now().Add(30 * time.Second); fdwaittest.EpollsHolding(t, listener) != 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the idle sandbox's seccomp listener is in %d epoll instances after 30s, want 1 (the waiter's)", fdwaittest.EpollsHolding(t, listener))
		}
	}
	if n := fdwaittest.EpollsHolding(t, pidfd); n != 0 {
		t.Fatalf("the idle sandbox's pidfd is in %d epoll instances, want none", n)
	}
}

// An idle sandbox's supervision keeps nothing for connects it has not
// made: the bound on connects answered at once, the signal that aborts
// them and the set stop aborts are each made by the first connect (or by
// stop), not for every session's life.
func TestIdleSupervisionHoldsNoConnectState(t *testing.T) {
	spec := testSpec(t, &sandboxdv1.Policy{Network: &sandboxdv1.Network{Mode: sandboxdv1.Network_NONE}}, "sleep", "1000")
	p, err := newBackend(t).Start(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		p.Kill()
		p.Wait()
		noSupervisorLeft(t)
	}()
	sv := p.(*process).supervisor
	if sv == nil {
		t.Skip("no seccomp supervision on this host")
	}
	sv.mu.Lock()
	defer sv.mu.Unlock()
	if sv.connectSlots != nil || sv.done != nil || sv.drained != nil || sv.inFlight != nil {
		t.Fatalf("an idle supervision holds connect state: slots %v, done %v, drained %v, in flight %v", sv.connectSlots != nil, sv.done != nil, sv.drained != nil, sv.inFlight != nil)
	}
}

package launcherlinux

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/launcher_linux/sandboxinit"
	"golang.org/x/sys/unix"
)

// TestSignalInTheSpawnersHandoverWaitsForTheInit: a signal the daemon
// forwards the moment it learns an init runs (a resize, SIGTERM) must wait
// for the init, not act by its default action. The spawner's child is
// stopped with ptrace where that can happen, at the return of the
// rt_sigprocmask(SIG_SETMASK) that comes just before it tells the spawner
// it runs, and sent SIGTERM there; the init must live on.
func TestSignalInTheSpawnersHandoverWaitsForTheInit(t *testing.T) {
	// A spawner started as its lane starts one, but without a goroutine
	// waiting for its exit, which would take the stops ptrace reports.
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	end := os.NewFile(uintptr(pair[1]), "spawner")
	sock, err := pollable(pair[0], "spawner")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := sock.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	cmd := &exec.Cmd{Path: initBinaryPath(t), Args: []string{sandboxinit.SpawnerArg0}, Env: []string{}, ExtraFiles: []*os.File{end}}
	err = cmd.Start()
	end.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer sock.Close()
	s := &spawner{lanes: []*spawnLane{{sock: sock, rc: rc}}}
	uid, gid := sandboxIdentity()
	key := initKey{uid: uid, gid: gid}
	// A first init, so that the spawner has re-executed itself.
	first, fds := spawnIdle(t, s, key)
	first.signal(syscall.SIGKILL)
	first.wait()
	closeAll(fds)

	traced := make(chan error, 1)
	attached := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		traced <- signalAtHandover(cmd.Process.Pid, attached)
	}()
	<-attached
	h, fds := spawnIdle(t, s, key)
	defer closeAll(fds)
	defer func() {
		h.signal(syscall.SIGKILL)
		h.wait()
	}()
	if err := <-traced; errors.Is(err, unix.EPERM) {
		t.Skip("ptrace is not allowed here (Yama ptrace_scope or no CAP_SYS_PTRACE):", err)
	} else if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if st := procState(h.pid); st == "" || st == "Z" {
		t.Fatalf("the init ended (state %q) on a SIGTERM sent as the spawner's child handed over", st)
	}
	// Handed over with every signal blocked, the init then keeps blocked
	// only those it handles: a real-time signal it neither handles nor
	// needs must not stay pending for its life.
	if blk := sigBlocked(t, h.pid); blk&(1<<(35-1)) != 0 {
		t.Errorf("the idle init blocks SIGRTMIN+1 (SigBlk %016x)", blk)
	}
}

// sigBlocked is pid's SigBlk from /proc/PID/status.
func sigBlocked(t *testing.T, pid int) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "SigBlk:"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no SigBlk in /proc/%d/status", pid)
	return 0
}

// spawnIdle starts an init through s that waits for a plan on a pipe.
func spawnIdle(t *testing.T, s *spawner, key initKey) (*initHandle, []int) {
	t.Helper()
	var fds []int
	for range 2 {
		var p [2]int
		if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
			t.Fatal(err)
		}
		fds = append(fds, p[0], p[1])
	}
	pass, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	fds = append(fds, pass[0], pass[1])
	h, err := s.spawn(key, [3]int{fds[0], fds[3], pass[1]})
	if err != nil {
		closeAll(fds)
		t.Fatal(err)
	}
	return h, fds
}

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// signalAtHandover traces the spawner spawnerPid until it clones an init,
// steps the clone to the return of its rt_sigprocmask(SIG_SETMASK),
// sends it SIGTERM there and lets both go. It runs on one locked thread,
// as ptrace requires, and waits for those two alone: another child of the
// test binary's is its own waiter's.
func signalAtHandover(spawnerPid int, attached chan<- struct{}) error {
	opts := unix.PTRACE_O_TRACEFORK | unix.PTRACE_O_TRACECLONE | unix.PTRACE_O_TRACEVFORK | unix.PTRACE_O_TRACESYSGOOD
	// With its options: PTRACE_SETOPTIONS wants a stopped tracee.
	_, _, errno := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_SEIZE, uintptr(spawnerPid), 0, uintptr(opts), 0, 0)
	close(attached)
	if errno != 0 {
		return fmt.Errorf("seize spawner %d: %w", spawnerPid, errno)
	}
	deadline := time.Now().Add(10 * time.Second)
	child := 0
	for child == 0 {
		ws, err := waitStop(spawnerPid, deadline)
		if err != nil {
			unix.PtraceDetach(spawnerPid)
			return err
		}
		event := int(ws) >> 16
		if event == unix.PTRACE_EVENT_FORK || event == unix.PTRACE_EVENT_CLONE || event == unix.PTRACE_EVENT_VFORK {
			msg, err := unix.PtraceGetEventMsg(spawnerPid)
			if err != nil {
				unix.PtraceDetach(spawnerPid)
				return fmt.Errorf("clone of %d: %w", spawnerPid, err)
			}
			child = int(msg)
			unix.PtraceDetach(spawnerPid)
			break
		}
		sig := 0
		if event == 0 && ws.StopSignal() != unix.SIGTRAP {
			sig = int(ws.StopSignal())
		}
		unix.PtraceCont(spawnerPid, sig)
	}
	// Whatever goes wrong from here, the clone is not left stopped: the
	// spawner would wait for it, and the test with it, until its timeout.
	err := stepToSetmask(child, deadline)
	if err != nil {
		unix.Kill(child, unix.SIGKILL)
		unix.PtraceDetach(child)
	}
	return err
}

func stepToSetmask(child int, deadline time.Time) error {
	inSyscall, setmask := false, false
	for {
		ws, err := waitStop(child, deadline)
		if err != nil {
			return err
		}
		switch {
		case int(ws)>>16 == unix.PTRACE_EVENT_STOP:
			unix.PtraceSyscall(child, 0)
		case ws.StopSignal() == unix.SIGTRAP|0x80:
			var regs unix.PtraceRegs
			if err := unix.PtraceGetRegs(child, &regs); err != nil {
				return fmt.Errorf("registers of %d: %w", child, err)
			}
			inSyscall = !inSyscall
			if inSyscall {
				setmask = regs.Orig_rax == unix.SYS_RT_SIGPROCMASK && regs.Rdi == unix.SIG_SETMASK
				unix.PtraceSyscall(child, 0)
				continue
			}
			if setmask {
				if err := unix.Tgkill(child, child, unix.SIGTERM); err != nil {
					return fmt.Errorf("SIGTERM to %d: %w", child, err)
				}
				if err := unix.PtraceDetach(child); err != nil {
					return fmt.Errorf("detach %d: %w", child, err)
				}
				return nil
			}
			unix.PtraceSyscall(child, 0)
		default:
			unix.PtraceSyscall(child, int(ws.StopSignal()))
		}
	}
}

// waitStop waits for pid's next ptrace stop, until deadline.
func waitStop(pid int, deadline time.Time) (unix.WaitStatus, error) {
	for {
		var ws unix.WaitStatus
		got, err := unix.Wait4(pid, &ws, unix.WALL|unix.WNOHANG, nil)
		if err != nil {
			return ws, fmt.Errorf("wait %d: %w", pid, err)
		}
		if got == pid {
			if !ws.Stopped() {
				return ws, fmt.Errorf("%d ended while traced (%#x)", pid, uint32(ws))
			}
			return ws, nil
		}
		if time.Now().After(deadline) {
			return ws, fmt.Errorf("wait %d: %w", pid, os.ErrDeadlineExceeded)
		}
		time.Sleep(time.Millisecond)
	}
}

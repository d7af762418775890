package launcherlinux

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/launcher"
)

// A daemon with no descriptor free gets the init's fd dropped by the
// kernel, with MSG_CTRUNC: that is the daemon's limit, and the error must
// say so (it read "bad control message: <nil>") and count as the host's
// resources, not as a malformed message of the init's.
func TestReceiveFdAtTheDescriptorLimitBlamesTheLimit(t *testing.T) {
	if os.Getenv(envReceiveAtLimit) == "" {
		// In a process of its own: the limit and the fd table are the
		// process's, and a goroutine of another test's (a spawner's
		// Wait closing its pidfd, say) would close an fd between the
		// filling and the receive, giving the receive a descriptor and
		// failing the test, or fail on the lowered limit itself.
		cmd := exec.Command(os.Args[0], "-test.run", "^TestReceiveFdAtTheDescriptorLimitBlamesTheLimit$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), envReceiveAtLimit+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS") {
			t.Errorf("in a process of its own: %v\n%s", err, out)
		}
		return
	}
	receiveAtTheDescriptorLimit(t)
}

// envReceiveAtLimit marks the process TestReceiveFdAtTheDescriptorLimitBlamesTheLimit
// runs its receive in.
const envReceiveAtLimit = "SANDBOXD_TEST_RECEIVE_AT_LIMIT"

func receiveAtTheDescriptorLimit(t *testing.T) {
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	recv := os.NewFile(uintptr(pair[0]), "receiver")
	defer recv.Close()
	defer unix.Close(pair[1])
	if err := unix.Sendmsg(pair[1], []byte{'x'}, unix.UnixRights(pair[1]), nil, 0); err != nil {
		t.Fatal(err)
	}
	rc, err := recv.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}

	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	// Every descriptor below the limit taken, so that the receive has
	// none to install the fd at.
	top, err := unix.FcntlInt(uintptr(pair[1]), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(top)
	lim := old
	lim.Cur = uint64(top) + 16
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	defer unix.Setrlimit(unix.RLIMIT_NOFILE, &old)
	var filled []int
	defer func() {
		for _, fd := range filled {
			unix.Close(fd)
		}
	}()
	for {
		fd, err := unix.FcntlInt(uintptr(pair[1]), unix.F_DUPFD_CLOEXEC, 0)
		if errors.Is(err, unix.EMFILE) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		filled = append(filled, fd)
	}

	fd, err := receiveFd(rc, 'x')
	if err == nil {
		unix.Close(fd)
		t.Fatal("received an fd with no descriptor free")
	}
	if !errors.Is(err, launcher.ErrHostResources) || !strings.Contains(err.Error(), "RLIMIT_NOFILE") {
		t.Errorf("error %q: want one of the host's resources that names RLIMIT_NOFILE", err)
	}
}

package launcherlinux

import (
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/internal/bpfrun"
)

// Every program the options can make is one the kernel loads: the tests
// that run them (bpfrun) see only the instructions their data reaches, and
// a jump off the end, a load outside struct seccomp_data or an unknown code
// on a path no test takes would fail every launch with those options at
// the init's seccomp(), found on a user's host. Checked statically, on
// every instruction, and by the kernel itself, loading each on a thread of
// its own in a process of its own: a goroutine that ends locked to its
// thread ends the thread, but were it the main thread the runtime would
// park it, filter and all, for the rest of the test binary.
func TestSeccompProgramsLoad(t *testing.T) {
	load := os.Getenv(envSeccompLoads) != ""
	if !load {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestSeccompProgramsLoad$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), envSeccompLoads+"=1")
		if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "--- PASS") {
			t.Errorf("loading the programs in a process of their own: %v\n%s", err, out)
		}
	}
	fields := reflect.TypeFor[SeccompOptions]().NumField()
	for bits := range 1 << fields {
		var o SeccompOptions
		v := reflect.ValueOf(&o).Elem()
		for i := range fields {
			v.Field(i).SetBool(bits&(1<<i) != 0)
		}
		prog, err := SeccompProgram(o)
		if err != nil {
			t.Fatalf("%+v: %v", o, err)
		}
		if !load {
			if err := bpfrun.Check(prog); err != nil {
				t.Errorf("%+v: %v", o, err)
			}
		} else if err := loadOnAThread(prog); err != nil {
			t.Errorf("%+v: %v", o, err)
		}
	}
}

// envSeccompLoads marks the process TestSeccompProgramsLoad loads its
// programs in.
const envSeccompLoads = "SANDBOXD_TEST_SECCOMP_LOADS"

// loadOnAThread loads prog as a seccomp filter on a thread that no other
// goroutine runs on after it: the goroutine ends locked to it.
func loadOnAThread(prog []SockFilter) error {
	done := make(chan error)
	go func() {
		// Never unlocked: the runtime ends the thread with the
		// goroutine, or parks it for good if it is the main thread;
		// either way no other goroutine runs under the filter.
		runtime.LockOSThread()
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			done <- fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
			return
		}
		fp := unix.SockFprog{Len: uint16(len(prog)), Filter: (*unix.SockFilter)(unsafe.Pointer(&prog[0]))}
		if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fp))); errno != 0 {
			done <- fmt.Errorf("seccomp(SECCOMP_SET_MODE_FILTER) of %d instructions: %w", len(prog), errno)
			return
		}
		done <- nil
	}()
	return <-done
}

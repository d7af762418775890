package launcherlinux

import (
	"fmt"
	"reflect"
	"runtime"
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
// every instruction, and by the kernel itself, loading each on a thread
// of its own that ends with it.
func TestSeccompProgramsLoad(t *testing.T) {
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
		if err := bpfrun.Check(prog); err != nil {
			t.Errorf("%+v: %v", o, err)
		}
		if err := loadOnAThread(prog); err != nil {
			t.Errorf("%+v: %v", o, err)
		}
	}
}

// loadOnAThread loads prog as a seccomp filter on a thread that exits
// once it has, taking the filter with it.
func loadOnAThread(prog []SockFilter) error {
	done := make(chan error)
	go func() {
		// Never unlocked: the runtime ends the thread with the
		// goroutine, and no other goroutine runs under the filter.
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

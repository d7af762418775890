package mainstack

import (
	"os"
	"testing"
	"unsafe"
)

// moved says whether the main goroutine's stack was copied when a call
// needed 30 KiB more of it.
var moved bool

// TestMain runs on the main goroutine, whose stack init grew. The address
// of a local variable is kept as a number, which the runtime does not
// adjust when it copies a stack, so a copy shows as a different address.
func TestMain(m *testing.M) {
	var local byte
	before := uintptr(unsafe.Pointer(&local))
	deep()
	moved = uintptr(unsafe.Pointer(&local)) != before
	os.Exit(m.Run())
}

//go:noinline
func deep() {
	var f [30 << 10]byte
	touch(f[:])
}

func TestTheMainStackIsGrownAtInit(t *testing.T) {
	if moved {
		t.Error("the main goroutine's stack was copied when a call needed 30 KiB of it: init did not grow it")
	}
}

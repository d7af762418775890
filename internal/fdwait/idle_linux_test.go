package fdwait

import (
	"errors"
	"io"
	"os"
	"testing"
	"time"
)

// idleReader is a reader as the daemon's are: it reads r with linger and
// sends what it read, then "rest" when it handed r to the waiter or "end"
// at EOF.
type idleReader struct {
	r    *os.File
	idle Idle
	got  chan string
}

func newIdleReader(t *testing.T, linger time.Duration) (*idleReader, *os.File) {
	r, w := pipe(t)
	ir := &idleReader{r: r, got: make(chan string, 16)}
	ir.idle.Init(r, linger, ir.run)
	return ir, w
}

func (ir *idleReader) run() {
	linger := ir.idle.Linger()
	buf := make([]byte, 64)
	for {
		n, err := ir.r.Read(buf)
		if n > 0 {
			ir.got <- string(buf[:n])
			ir.idle.Active()
		}
		switch {
		case err == nil:
		case linger && errors.Is(err, os.ErrDeadlineExceeded):
			var rest bool
			if rest, linger = ir.idle.Quiet(); rest {
				ir.got <- "rest"
				return
			}
		case errors.Is(err, io.EOF):
			ir.idle.Done()
			ir.got <- "end"
			return
		default:
			ir.got <- err.Error()
			return
		}
	}
}

func expect(t *testing.T, ch chan string, want string) {
	t.Helper()
	if got := <-ch; got != want {
		t.Fatalf("reader: %q, want %q", got, want)
	}
}

func TestIdleRestsAndIsWokenByData(t *testing.T) {
	ir, w := newIdleReader(t, time.Millisecond)
	go ir.run()
	expect(t, ir.got, "rest")
	w.Write([]byte("x"))
	expect(t, ir.got, "x")
	expect(t, ir.got, "rest")
	w.Close()
	expect(t, ir.got, "end")
	if err := ir.idle.wait.Rearm(); err == nil {
		t.Fatal("the registration outlived Done")
	}
}

// A file read to its end without a pause never enters the waiter.
func TestIdleReadToItsEndNeverRegisters(t *testing.T) {
	ir, w := newIdleReader(t, time.Hour)
	w.Write([]byte("x"))
	w.Close()
	ir.run()
	expect(t, ir.got, "x")
	expect(t, ir.got, "end")
	if ir.idle.wait != nil {
		t.Fatal("a file that never rested was registered")
	}
}

func TestIdleStopTakesOverARestingFile(t *testing.T) {
	ir, w := newIdleReader(t, time.Millisecond)
	go ir.run()
	expect(t, ir.got, "rest")
	if !ir.idle.Stop() {
		t.Fatal("Stop of a resting file: not idle")
	}
	// The waiter starts no reader now: it would take the data the
	// caller's reader is to read.
	w.Write([]byte("x"))
	settle(t)
	if len(ir.got) != 0 {
		t.Fatalf("the waiter started a reader after Stop: %q", <-ir.got)
	}
	if ir.idle.Stop() {
		t.Fatal("a second Stop found the file idle")
	}
	// Nor does the file rest again: a reader past its deadline reads on.
	ir.r.SetReadDeadline(time.Now())
	if rest, linger := ir.idle.Quiet(); rest || linger {
		t.Fatalf("Quiet after Stop: rest %v, linger %v", rest, linger)
	}
	ir.r.SetReadDeadline(time.Time{})
	w.Close()
	ir.run()
	expect(t, ir.got, "x")
	expect(t, ir.got, "end")
}

func TestIdleStopOfARunningReader(t *testing.T) {
	ir, w := newIdleReader(t, time.Hour)
	go ir.run()
	w.Write([]byte("x"))
	expect(t, ir.got, "x")
	if ir.idle.Stop() {
		t.Fatal("Stop found a file idle while its reader runs")
	}
	w.Close()
	expect(t, ir.got, "end")
}

// A file handed to the waiter before any reader ran gets its first
// reader when it has something.
func TestIdleRestBeforeAnyReader(t *testing.T) {
	ir, w := newIdleReader(t, time.Hour)
	if !ir.idle.Rest() {
		t.Fatal("Rest: the waiter did not take the file")
	}
	settle(t)
	if len(ir.got) != 0 {
		t.Fatalf("a reader started before the file had anything: %q", <-ir.got)
	}
	w.Write([]byte("x"))
	expect(t, ir.got, "x")
	w.Close()
	expect(t, ir.got, "end")
}

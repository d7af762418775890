package daemon

import (
	"bytes"
	"sync"
	"testing"
	"time"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

func TestDrainKeepsOutputForASlowClient(t *testing.T) {
	sio, err := openStdio(false, nil, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer sio.closeAll()
	// The sandbox wrote a pipe's worth and is gone.
	want := bytes.Repeat([]byte("0123456789abcdef"), 4096)
	if _, err := sio.child.Stdout.Write(want); err != nil {
		t.Fatal(err)
	}
	sio.closeChild()
	var mu sync.Mutex
	var got bytes.Buffer
	slowSend := func(o *sandboxdv1.Output) {
		// Each send takes longer than the grace period.
		time.Sleep(120 * time.Millisecond)
		mu.Lock()
		defer mu.Unlock()
		got.Write(o.GetData())
	}
	sio.drain()
	sio.pump(sio.outputs[0], slowSend)
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatalf("drained %d of %d bytes", got.Len(), len(want))
	}
}

func TestDrainEndsWhenALeakedWriterKeepsThePipeOpen(t *testing.T) {
	sio, err := openStdio(false, nil, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer sio.closeAll()
	// Stands in for a process that escaped the backend's Kill holding the
	// write end: the daemon must not wait for it forever.
	leaked := sio.child.Stdout
	defer leaked.Close()
	sio.child.Stdin.Close()
	sio.child.Stderr.Close()
	done := make(chan struct{})
	go func() {
		sio.pump(sio.outputs[0], func(*sandboxdv1.Output) {})
		close(done)
	}()
	time.Sleep(20 * time.Millisecond)
	sio.drain()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("pump still waiting on a pipe held open by a leaked writer")
	}
}

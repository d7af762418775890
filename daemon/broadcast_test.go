package daemon

import (
	"errors"
	"fmt"
	"testing"
	"time"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

func TestBroadcastCutsOffAWatcherThatFallsBehindButNotTheOwner(t *testing.T) {
	b := newBroadcast(1 << 20)
	owner, _, _ := b.join(true)
	watcher, _, _ := b.join(false)
	got := make(chan int)
	go func() {
		n := 0
		for range owner.ch {
			n++
		}
		got <- n
	}()
	const chunks = viewerQueue * 3
	for i := range chunks {
		b.publish(&sandboxdv1.Output{Stream: sandboxdv1.Output_STDOUT, Data: fmt.Appendf(nil, "%d\n", i)})
	}
	if n := b.count(); n != 1 {
		t.Fatalf("%d viewers after the watcher fell behind, want only the owner", n)
	}
	b.end(&sandboxdv1.Exit{State: sandboxdv1.State_EXITED})
	if n := <-got; n != chunks {
		t.Fatalf("owner got %d of %d chunks", n, chunks)
	}
	if exit, err := b.result(owner); err != nil || exit.GetState() != sandboxdv1.State_EXITED {
		t.Fatalf("owner's result %v, %v", exit, err)
	}
	n := 0
	for range watcher.ch {
		n++
	}
	if _, err := b.result(watcher); !errors.Is(err, errViewerBehind) || n != viewerQueue {
		t.Fatalf("watcher got %d chunks and %v, want %d and errViewerBehind", n, err, viewerQueue)
	}
	// The scrollback has everything the watcher missed.
	late, replay, exit := b.join(false)
	if late != nil || len(replay) != chunks || exit.GetState() != sandboxdv1.State_EXITED {
		t.Fatalf("join after the end: viewer %v, %d chunks, exit %v", late, len(replay), exit)
	}
}

func TestBroadcastDoesNotWaitForAnOwnerThatLeft(t *testing.T) {
	b := newBroadcast(1 << 10)
	owner, _, _ := b.join(true)
	b.leave(owner)
	for range viewerQueue * 2 {
		b.publish(&sandboxdv1.Output{Data: []byte("x")})
	}
	b.end(&sandboxdv1.Exit{})
}

// A session nobody watches, as a detached one mostly is, keeps no set of
// viewers, and an ended session drops the one it had; viewers still join,
// leave and get the Exit.
func TestBroadcastKeepsNoViewerSetWithoutViewers(t *testing.T) {
	b := newBroadcast(1 << 10)
	b.publish(&sandboxdv1.Output{Stream: sandboxdv1.Output_STDOUT, Data: []byte("x")})
	if b.viewers != nil {
		t.Fatal("a broadcast nobody joined holds a viewer set")
	}
	v, replay, _ := b.join(false)
	if len(replay) != 1 || b.count() != 1 {
		t.Fatalf("join: replay %d chunks, %d viewers; want 1 and 1", len(replay), b.count())
	}
	b.end(&sandboxdv1.Exit{State: sandboxdv1.State_EXITED})
	if _, ok := <-v.ch; ok {
		t.Fatal("a viewer's channel is open after the end")
	}
	if b.viewers != nil || b.count() != 0 {
		t.Fatal("an ended broadcast still holds its viewer set")
	}
}

// A watcher is cut off once a flooding session's large reads put more
// than viewerQueueBytes behind it, not only after viewerQueue of them.
func TestBroadcastCutsOffAWatcherBehindByBytes(t *testing.T) {
	b := newBroadcast(1 << 20)
	watcher, _, _ := b.join(false)
	chunk := make([]byte, largeOutputMessage)
	const chunks = viewerQueueBytes/largeOutputMessage + 1
	for range chunks {
		b.publish(&sandboxdv1.Output{Stream: sandboxdv1.Output_STDOUT, Data: chunk})
	}
	if n := b.count(); n != 0 {
		t.Fatalf("%d viewers after %d bytes were put behind the watcher, want none", n, chunks*len(chunk))
	}
	queued := 0
	for o := range watcher.ch {
		queued += len(o.GetData())
	}
	if _, err := b.result(watcher); !errors.Is(err, errViewerBehind) || queued > viewerQueueBytes {
		t.Fatalf("watcher had %d bytes queued and %v, want at most %d and errViewerBehind", queued, err, viewerQueueBytes)
	}
}

// The owner's queue is bounded in bytes too: publish waits for the owner
// to take its output once viewerQueueBytes are queued, and the owner still
// gets every chunk, in order.
func TestBroadcastHoldsOutputBackForAnOwnerBehindByBytes(t *testing.T) {
	b := newBroadcast(1 << 20)
	owner, _, _ := b.join(true)
	const chunks = 3 * viewerQueueBytes / largeOutputMessage
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range chunks {
			data := make([]byte, largeOutputMessage)
			data[0] = byte(i)
			b.publish(&sandboxdv1.Output{Stream: sandboxdv1.Output_STDOUT, Data: data})
		}
	}()
	select {
	case <-done:
	case <-time.After(500 * time.Millisecond):
	}
	if queued := len(owner.ch) * largeOutputMessage; queued > viewerQueueBytes {
		t.Fatalf("%d bytes queued for an owner that takes nothing, want at most %d", queued, viewerQueueBytes)
	}
	for i := range chunks {
		o := <-owner.ch
		owner.took(o)
		if got := o.GetData()[0]; got != byte(i) {
			t.Fatalf("chunk %d came where chunk %d was due", got, i)
		}
	}
	<-done
	b.end(&sandboxdv1.Exit{State: sandboxdv1.State_EXITED})
	if _, ok := <-owner.ch; ok {
		t.Fatal("the owner's channel is open after the end")
	}
}

package client

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// busy is a refusal as the daemon makes it when a caller is at a quota
// that frees by itself: ResourceExhausted with a RetryInfo.
func busy() error { return busyFor(10 * time.Millisecond) }

func busyFor(d time.Duration) error {
	st, err := status.New(codes.ResourceExhausted, "quota reached: uid 0 has 4 launches in flight").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(d)})
	if err != nil {
		panic(err)
	}
	return st.Err()
}

// TestRunRetriesABusyDaemon: a Start refused with a retry hint is sent
// again after a delay until the daemon takes it; one refused without a
// hint is not.
func TestRunRetriesABusyDaemon(t *testing.T) {
	var attempts atomic.Int32
	sock, _ := serve(t, &scriptedServer{session: func(stream sessionStream) error {
		if _, err := recvStart(stream); err != nil {
			return err
		}
		if attempts.Add(1) <= 3 {
			return busy()
		}
		if err := stream.Send(started("s1")); err != nil {
			return err
		}
		return stream.Send(exit(&sandboxdv1.Exit{State: sandboxdv1.State_EXITED, ExitCode: 7}))
	}})
	c := dial(t, sock)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := c.Run(ctx, RunOptions{Start: runStart("true")})
	if err != nil || res.Exit.GetExitCode() != 7 {
		t.Fatalf("Run = %v, %v; want exit 7 after the refusals", res, err)
	}
	if n := attempts.Load(); n != 4 {
		t.Errorf("%d attempts, want 4", n)
	}

	attempts.Store(0)
	sock, _ = serve(t, &scriptedServer{session: func(stream sessionStream) error {
		attempts.Add(1)
		return status.Error(codes.ResourceExhausted, "quota reached: uid 0 has 2 sessions not yet ended")
	}})
	c = dial(t, sock)
	if _, err := c.Run(ctx, RunOptions{Start: runStart("true")}); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("Run = %v, want ResourceExhausted", err)
	}
	if n := attempts.Load(); n != 1 {
		t.Errorf("%d attempts of a refusal without a retry hint, want 1", n)
	}
}

// TestRunDoesNotWaitBeyondDialTimeout: a hint longer than DialTimeout is
// not slept through, even by a caller whose context has no deadline; the
// refusal is returned at once.
func TestRunDoesNotWaitBeyondDialTimeout(t *testing.T) {
	var attempts atomic.Int32
	sock, _ := serve(t, &scriptedServer{session: func(stream sessionStream) error {
		attempts.Add(1)
		return busyFor(100 * 365 * 24 * time.Hour)
	}})
	c := dial(t, sock)
	done := make(chan error, 1)
	go func() {
		_, err := c.Run(context.Background(), RunOptions{Start: runStart("true")})
		done <- err
	}()
	select {
	case err := <-done:
		if status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("Run = %v, want the ResourceExhausted refusal", err)
		}
	case <-time.After(DialTimeout / 2):
		t.Fatalf("Run still waiting on a hint of a century after %v", DialTimeout/2)
	}
	if n := attempts.Load(); n != 1 {
		t.Errorf("%d attempts, want 1", n)
	}
}

// TestBackoffGrowsWithJitter: delays double up to retryMax, each a random
// share of at least half its ceiling, never below the daemon's hint; a
// wait that would outlast ctx is not begun.
func TestBackoffGrowsWithJitter(t *testing.T) {
	var b backoff
	seen := map[time.Duration]bool{}
	for i := range 12 {
		ceil := min(retryMax, retryBase<<i)
		d := b.next(nil)
		if d < ceil/2 || d > ceil {
			t.Errorf("delay %d is %v, want within [%v, %v]", i, d, ceil/2, ceil)
		}
		seen[d] = true
	}
	if len(seen) < 6 {
		t.Errorf("delays %v: no jitter", seen)
	}
	b = backoff{}
	if d := b.next(status.Convert(busyFor(time.Second))); d < time.Second {
		t.Errorf("delay %v, below the daemon's hint of 1s", d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	b = backoff{n: 10}
	if b.wait(ctx, status.Convert(busyFor(2*time.Hour))) {
		t.Errorf("a wait longer than ctx's deadline was begun")
	}
}

// TestRetryHintReadsRetryInfoAsProtoDoes: the hint read from the
// RetryInfo's encoding is what decoding it as errdetails.RetryInfo (what
// st.Details() gives a program linking errdetails) would make of it.
func TestRetryHintReadsRetryInfoAsProtoDoes(t *testing.T) {
	enc := func(ri *errdetails.RetryInfo) []byte {
		b, err := proto.Marshal(ri)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	d := func(s int64, n int32) *durationpb.Duration { return &durationpb.Duration{Seconds: s, Nanos: n} }
	second := enc(&errdetails.RetryInfo{RetryDelay: d(2, 0)})
	merged := append(enc(&errdetails.RetryInfo{RetryDelay: d(1, 5)}), enc(&errdetails.RetryInfo{RetryDelay: d(0, 7)})...)
	unknown := protowire.AppendVarint(protowire.AppendTag(enc(&errdetails.RetryInfo{RetryDelay: d(0, 3e6)}), 9, protowire.VarintType), 4)
	wrongType := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 4)
	for _, c := range []struct {
		name string
		code codes.Code
		url  string
		val  []byte
	}{
		{"a delay", codes.ResourceExhausted, "type.googleapis.com/google.rpc.RetryInfo", second},
		{"no delay", codes.ResourceExhausted, "type.googleapis.com/google.rpc.RetryInfo", nil},
		{"another prefix", codes.ResourceExhausted, "example.com/x/google.rpc.RetryInfo", second},
		{"no prefix", codes.ResourceExhausted, "google.rpc.RetryInfo", second},
		{"merged", codes.ResourceExhausted, "type.googleapis.com/google.rpc.RetryInfo", merged},
		{"an unknown field", codes.ResourceExhausted, "type.googleapis.com/google.rpc.RetryInfo", unknown},
		{"the field as a varint", codes.ResourceExhausted, "type.googleapis.com/google.rpc.RetryInfo", wrongType},
		{"huge", codes.ResourceExhausted, "type.googleapis.com/google.rpc.RetryInfo", enc(&errdetails.RetryInfo{RetryDelay: d(1<<62, 999999999)})},
		{"negative", codes.ResourceExhausted, "type.googleapis.com/google.rpc.RetryInfo", enc(&errdetails.RetryInfo{RetryDelay: d(-3, 0)})},
		{"truncated", codes.ResourceExhausted, "type.googleapis.com/google.rpc.RetryInfo", second[:len(second)-1]},
		{"field 0", codes.ResourceExhausted, "type.googleapis.com/google.rpc.RetryInfo", []byte{0x00, 0x01}},
		{"another type", codes.ResourceExhausted, "type.googleapis.com/google.rpc.DebugInfo", second},
		{"another code", codes.Unavailable, "type.googleapis.com/google.rpc.RetryInfo", second},
	} {
		st := status.FromProto(&spb.Status{Code: int32(c.code), Message: "busy", Details: []*anypb.Any{{TypeUrl: c.url, Value: c.val}}})
		var want time.Duration
		if c.code == codes.ResourceExhausted {
			for _, det := range st.Details() {
				if ri, ok := det.(*errdetails.RetryInfo); ok {
					want = max(ri.GetRetryDelay().AsDuration(), time.Millisecond)
					break
				}
			}
		}
		if got := retryHint(st); got != want {
			t.Errorf("%s: hint %v, want %v", c.name, got, want)
		}
	}
}

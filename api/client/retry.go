package client

import (
	"context"
	"math/rand/v2"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Retries of a call the daemon refused for now: the delay doubles from
// retryBase to retryMax, each one a random fraction (jitter) of it, so
// that many clients refused together do not come back together.
const (
	retryBase = 50 * time.Millisecond
	retryMax  = 2 * time.Second
)

// retryHint is the delay the daemon's RetryInfo asks for, 0 without one.
func retryHint(st *status.Status) time.Duration {
	if st.Code() != codes.ResourceExhausted {
		return 0
	}
	for _, det := range st.Details() {
		if ri, ok := det.(*errdetails.RetryInfo); ok {
			return max(ri.GetRetryDelay().AsDuration(), time.Millisecond)
		}
	}
	return 0
}

// backoff is the state of one call's retries.
type backoff struct{ n int }

// next is the delay before the next attempt: a random share, at least
// half, of a ceiling that doubles from retryBase to retryMax, and at least
// the daemon's hint.
func (b *backoff) next(st *status.Status) time.Duration {
	ceil := min(retryMax, retryBase<<min(b.n, 16))
	b.n++
	return max(ceil/2+rand.N(ceil/2+1), retryHint(st))
}

// wait sleeps before the next attempt: the backoff's delay, at least what
// the daemon's RetryInfo in st (if any) asks for. It returns false, at
// once, when ctx would end first.
func (b *backoff) wait(ctx context.Context, st *status.Status) bool {
	d := b.next(st)
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

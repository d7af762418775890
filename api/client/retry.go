package client

import (
	"context"
	"math/rand/v2"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Retries of a call the daemon refused for now: the delay doubles from
// retryBase to retryMax, each one a random fraction (jitter) of it, so
// that many clients refused together do not come back together.
const (
	retryBase = 50 * time.Millisecond
	retryMax  = 2 * time.Second
)

// retryHint is the delay the daemon's RetryInfo asks for, 0 without one.
// The RetryInfo is read from its encoding (retryDelay) rather than through
// st.Details(), which would take google.golang.org/genproto's errdetails,
// whose initialiser registers a dozen message types at every start of
// every client (0.06M instructions, 15 KiB, of a sandboxctl start).
func retryHint(st *status.Status) time.Duration {
	if st.Code() != codes.ResourceExhausted {
		return 0
	}
	for _, det := range st.Proto().GetDetails() {
		url := det.GetTypeUrl()
		if url[strings.LastIndexByte(url, '/')+1:] != "google.rpc.RetryInfo" {
			continue
		}
		if d, ok := retryDelay(det.GetValue()); ok {
			return max(d, time.Millisecond)
		}
	}
	return 0
}

// retryDelay decodes a google.rpc.RetryInfo, whose only field is
// retry_delay (1, a google.protobuf.Duration), as proto.Unmarshal
// would: the occurrences of the field merged, other fields skipped; ok
// is false for an encoding that does not parse.
func retryDelay(b []byte) (time.Duration, bool) {
	var delay []byte
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, false
		}
		b = b[n:]
		if num == 1 && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return 0, false
			}
			delay, b = append(delay, v...), b[n:]
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return 0, false
		}
		b = b[n:]
	}
	var d durationpb.Duration
	if err := proto.Unmarshal(delay, &d); err != nil {
		return 0, false
	}
	return d.AsDuration(), true
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

package daemon

import (
	"context"
	"errors"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sandboxd/sandboxd/launcher"
	"github.com/sandboxd/sandboxd/policy"
)

// Sentinels the Service wraps with context; toStatus turns them into gRPC
// codes at the edge, so nothing inside the daemon speaks gRPC codes.
var (
	ErrNotFound        = errors.New("not found")
	ErrNotRunning      = errors.New("session is not running")
	ErrUnauthenticated = errors.New("caller identity unknown")
	ErrShuttingDown    = errors.New("daemon is shutting down")
	ErrBusy            = errors.New("busy")
	// ErrFirstMessageLate: a stream sent no first message in time.
	ErrFirstMessageLate = errors.New("first message late")
	// ErrPermission: the caller asked for something it may not have.
	ErrPermission = errors.New("permission denied")
	// ErrPrecondition: what was asked cannot be done as things stand on
	// the host (a layered path was moved since), which the caller can
	// change.
	ErrPrecondition = errors.New("failed precondition")
)

// RequestError says that a field of a request outside the policy is invalid
// (the policy's own fields are reported by *policy.FieldError).
type RequestError struct {
	// Field is the request field path, e.g. "command.cwd".
	Field string
	Msg   string
}

func (e *RequestError) Error() string { return e.Field + ": " + e.Msg }

// toStatus is the one mapping from daemon errors to gRPC statuses.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	var (
		fe *policy.FieldError
		we *policy.WidenError
		re *RequestError
		ue *launcher.Unenforceable
		qe *QuotaError
	)
	switch {
	case errors.Is(err, ErrPermission):
		return status.Error(codes.PermissionDenied, err.Error())
	case errors.As(err, &we):
		// A child asking for more than its parent has is not malformed;
		// it is not allowed.
		return status.Error(codes.PermissionDenied, err.Error())
	case errors.As(err, &fe), errors.As(err, &re):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.As(err, &ue):
		st, derr := status.New(codes.FailedPrecondition, err.Error()).WithDetails(ue.Proto())
		if derr != nil {
			return status.Error(codes.FailedPrecondition, err.Error())
		}
		return st.Err()
	case errors.Is(err, errors.ErrUnsupported):
		// Something this host cannot do at all, such as a signal that
		// Windows has no way to deliver: not a fault of the daemon's.
		return status.Error(codes.Unimplemented, err.Error())
	case errors.Is(err, ErrNotFound):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, ErrNotRunning), errors.Is(err, ErrBusy), errors.Is(err, ErrPrecondition):
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.Is(err, ErrUnauthenticated):
		return status.Error(codes.Unauthenticated, err.Error())
	case errors.Is(err, ErrWatcherBehind), errors.Is(err, launcher.ErrHostResources):
		return status.Error(codes.ResourceExhausted, err.Error())
	case errors.As(err, &qe):
		if !qe.Transient {
			return status.Error(codes.ResourceExhausted, err.Error())
		}
		// The delay says the client should come back: the quota frees
		// as the caller's own launches and streams end.
		st, derr := status.New(codes.ResourceExhausted, err.Error()).WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(retryAfter)})
		if derr != nil {
			return status.Error(codes.ResourceExhausted, err.Error())
		}
		return st.Err()
	case errors.Is(err, ErrShuttingDown), errors.Is(err, ErrAuditLog):
		return status.Error(codes.Unavailable, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, ErrFirstMessageLate):
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	// Errors from the stream itself (the client went away) already carry
	// their status.
	if st, ok := status.FromError(err); ok {
		return st.Err()
	}
	return status.Error(codes.Internal, err.Error())
}

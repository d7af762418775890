package daemon

import (
	"context"

	"google.golang.org/grpc"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/api/sandboxd/v1/sandboxdv1grpc"
	"github.com/sandboxd/sandboxd/internal/transport"
)

// callerFrom returns the identity the transport recorded for the
// connection a request came in on.
func callerFrom(ctx context.Context) (Caller, error) {
	c, ok := transport.CallerFrom(ctx)
	if !ok {
		return Caller{}, ErrUnauthenticated
	}
	return c, nil
}

// grpcServer adapts a Service to sandboxdv1grpc.SandboxdServer: it identifies
// the caller, forwards, and maps errors. Session logic lives in Service.
type grpcServer struct {
	sandboxdv1grpc.UnimplementedSandboxdServer
	svc *Service
}

func (g *grpcServer) Session(stream grpc.BidiStreamingServer[sandboxdv1.SessionRequest, sandboxdv1.SessionResponse]) error {
	caller, err := callerFrom(stream.Context())
	if err != nil {
		return toStatus(err)
	}
	return toStatus(g.svc.Session(caller, stream))
}

func (g *grpcServer) List(ctx context.Context, _ *sandboxdv1.ListRequest) (*sandboxdv1.ListResponse, error) {
	caller, err := callerFrom(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	return &sandboxdv1.ListResponse{Sessions: g.svc.List(ctx, caller)}, nil
}

func (g *grpcServer) Inspect(ctx context.Context, req *sandboxdv1.InspectRequest) (*sandboxdv1.SessionInfo, error) {
	caller, err := callerFrom(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	info, err := g.svc.Inspect(ctx, caller, req.GetId(), req.GetScreen())
	return info, toStatus(err)
}

func (g *grpcServer) Kill(ctx context.Context, req *sandboxdv1.KillRequest) (*sandboxdv1.KillResponse, error) {
	caller, err := callerFrom(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	if err := g.svc.Kill(ctx, caller, req.GetId(), req.GetSignal()); err != nil {
		return nil, toStatus(err)
	}
	return &sandboxdv1.KillResponse{}, nil
}

func (g *grpcServer) Capabilities(ctx context.Context, _ *sandboxdv1.CapabilitiesRequest) (*sandboxdv1.CapabilitiesReport, error) {
	return g.svc.Capabilities(ctx), nil
}

func (g *grpcServer) Watch(req *sandboxdv1.WatchRequest, stream grpc.ServerStreamingServer[sandboxdv1.Event]) error {
	caller, err := callerFrom(stream.Context())
	if err != nil {
		return toStatus(err)
	}
	return toStatus(g.svc.Watch(stream.Context(), caller, req, stream.Send))
}

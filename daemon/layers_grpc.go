package daemon

import (
	"context"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/api/sandboxd/v1/sandboxdv1grpc"
)

// layersServer adapts a Service to sandboxdv1grpc.LayersServer.
type layersServer struct {
	sandboxdv1grpc.UnimplementedLayersServer
	svc *Service
}

func (g *layersServer) ListLayers(ctx context.Context, _ *sandboxdv1.ListLayersRequest) (*sandboxdv1.ListLayersResponse, error) {
	caller, err := callerFrom(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	l, err := g.svc.ListLayers(caller)
	return &sandboxdv1.ListLayersResponse{Layers: l}, toStatus(err)
}

func (g *layersServer) Diff(ctx context.Context, req *sandboxdv1.DiffRequest) (*sandboxdv1.DiffResponse, error) {
	caller, err := callerFrom(ctx)
	if err == nil {
		err = checkID("session_id", req.GetSessionId())
	}
	if err != nil {
		return nil, toStatus(err)
	}
	d, err := g.svc.Diff(caller, req.GetSessionId(), req.GetPatch())
	if err != nil {
		return nil, toStatus(err)
	}
	return &sandboxdv1.DiffResponse{Layers: d}, nil
}

func (g *layersServer) Commit(ctx context.Context, req *sandboxdv1.CommitRequest) (*sandboxdv1.CommitResponse, error) {
	caller, err := callerFrom(ctx)
	if err == nil {
		err = checkID("session_id", req.GetSessionId())
	}
	if err != nil {
		return nil, toStatus(err)
	}
	d, err := g.svc.Commit(caller, req.GetSessionId(), req.GetForce())
	if err != nil {
		return nil, toStatus(err)
	}
	return &sandboxdv1.CommitResponse{Layers: d}, nil
}

func (g *layersServer) Discard(ctx context.Context, req *sandboxdv1.DiscardRequest) (*sandboxdv1.DiscardResponse, error) {
	caller, err := callerFrom(ctx)
	if err == nil {
		err = checkID("session_id", req.GetSessionId())
	}
	if err != nil {
		return nil, toStatus(err)
	}
	if err := g.svc.Discard(caller, req.GetSessionId()); err != nil {
		return nil, toStatus(err)
	}
	return &sandboxdv1.DiscardResponse{}, nil
}

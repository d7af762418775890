package client

import (
	"context"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// Layers lists the copy-on-write layers the daemon shows this caller:
// those of its own sessions (all for root and operators).
func (c *Client) Layers(ctx context.Context) ([]*sandboxdv1.Layer, error) {
	r := &sandboxdv1.ListLayersResponse{}
	if err := c.invoke(ctx, methodListLayers, &sandboxdv1.ListLayersRequest{}, r); err != nil {
		return nil, c.wrap(ctx, "list layers", err)
	}
	return r.GetLayers(), nil
}

// Diff says what session id's layers change, with a unified diff of the
// text files when patch is set.
func (c *Client) Diff(ctx context.Context, id string, patch bool) ([]*sandboxdv1.LayerDiff, error) {
	r := &sandboxdv1.DiffResponse{}
	if err := c.invoke(ctx, methodDiff, &sandboxdv1.DiffRequest{SessionId: id, Patch: patch}, r); err != nil {
		return nil, c.wrap(ctx, "diff "+id, err)
	}
	return r.GetLayers(), nil
}

// Commit applies session id's layers to their paths. It fails with
// FAILED_PRECONDITION, naming the files, when a file the layers change
// changed on the host since they were made, unless force.
func (c *Client) Commit(ctx context.Context, id string, force bool) ([]*sandboxdv1.LayerDiff, error) {
	r := &sandboxdv1.CommitResponse{}
	if err := c.invoke(ctx, methodCommit, &sandboxdv1.CommitRequest{SessionId: id, Force: force}, r); err != nil {
		return nil, c.wrap(ctx, "commit "+id, err)
	}
	return r.GetLayers(), nil
}

// Discard drops session id's layers.
func (c *Client) Discard(ctx context.Context, id string) error {
	if err := c.invoke(ctx, methodDiscard, &sandboxdv1.DiscardRequest{SessionId: id}, &sandboxdv1.DiscardResponse{}); err != nil {
		return c.wrap(ctx, "discard "+id, err)
	}
	return nil
}

//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/sandboxd/sandboxd/api/client"
	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// commitRounds is how many layers of --commit-files changed files are made
// and committed; the figure is their median.
const commitRounds = 3

// layersFigure is the cost of copy-on-write workspaces: the launch of
// /bin/true with the workspace layered against the same launch with it a
// write root, and the commit of a layer in which every one of
// --commit-files files was changed against cp -a of those files.
func (b *bench) layersFigure() error {
	if b.cfg.nLayers <= 0 || b.cfg.commitFiles <= 0 {
		return fmt.Errorf("--n-layers %d, --commit-files %d: must be positive", b.cfg.nLayers, b.cfg.commitFiles)
	}
	ws := filepath.Join(b.cfg.workspace, "layered")
	if err := os.MkdirAll(ws, 0o777); err != nil {
		return err
	}
	defer os.RemoveAll(ws)
	write := &sandboxdv1.Start{
		Policy:  &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{ws}}},
		Command: &sandboxdv1.Command{Argv: []string{"/bin/true"}, Cwd: ws},
	}
	layer := proto.CloneOf(write)
	layer.Policy.Filesystem = &sandboxdv1.Filesystem{Layer: []string{ws}}
	var made []string
	defer func() { b.discardAll(made) }()
	n := b.cfg.nLayers
	d, err := b.alternate(n,
		func() error {
			id, err := runLayered(b.ctx, b.cl, layer)
			if id != "" {
				made = append(made, id)
			}
			return err
		},
		func() error { return runSession(b.ctx, b.cl, write) },
	)
	if err != nil {
		return err
	}
	lv, wv := d[0].percentile(50), d[1].percentile(50)
	b.add(row{
		figure:      fmt.Sprintf("latency p50, /bin/true with --layer (n=%d)", n),
		value:       ms(lv),
		counterpart: "--write " + ms(wv),
		ratio:       ratio(float64(lv), float64(wv)),
	})
	b.reproduce("layers (a --layer and a --write launch alternate; the layers are discarded after):",
		b.benchtoolLine("layers", "--n-layers", fmt.Sprint(n), "--commit-files", fmt.Sprint(b.cfg.commitFiles)))

	var commits, copies, diffs durations
	for range commitRounds {
		c, cp, df, err := b.commitRound(ws)
		if err != nil {
			return err
		}
		commits, copies, diffs = append(commits, c), append(copies, cp), append(diffs, df)
	}
	cv, pv := commits.percentile(50), copies.percentile(50)
	b.add(row{
		figure:      fmt.Sprintf("commit of %d changed files (median of %d)", b.cfg.commitFiles, commitRounds),
		value:       ms(cv),
		counterpart: "cp -a " + ms(pv),
		ratio:       ratio(float64(cv), float64(pv)),
	})
	b.add(row{
		figure: fmt.Sprintf("diff of the same layer (median of %d)", commitRounds),
		value:  ms(diffs.percentile(50)),
	})
	return nil
}

// runLayered is runSession that also returns the session's id, whose
// layer the caller discards.
func runLayered(ctx context.Context, cl *client.Client, start *sandboxdv1.Start) (string, error) {
	res, err := cl.Run(ctx, client.RunOptions{Start: proto.CloneOf(start)})
	if err != nil {
		return "", err
	}
	if code := client.ExitCode(res, nil); code != 0 {
		return res.SessionID, fmt.Errorf("session %s ended %s, exit code %d: %s", res.SessionID, res.Exit.GetState(), code, res.Exit.GetReason())
	}
	return res.SessionID, nil
}

func (b *bench) discardAll(ids []string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, id := range slices.Compact(ids) {
		if err := b.cl.Discard(ctx, id); err != nil {
			warnf("discard the layer of session %s: %v", id, err)
		}
	}
}

// commitRound fills a fresh directory with --commit-files files, has a
// session change every one of them in a layer, and times the diff and the
// commit of that layer, and cp -a of the directory.
func (b *bench) commitRound(ws string) (commit, copyAll, diff time.Duration, err error) {
	dir, err := os.MkdirTemp(ws, "commit-")
	if err != nil {
		return 0, 0, 0, err
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o777); err != nil {
		return 0, 0, 0, err
	}
	for i := range b.cfg.commitFiles {
		if err := os.WriteFile(filepath.Join(dir, "f"+strconv.Itoa(i)), []byte("before\n"), 0o666); err != nil {
			return 0, 0, 0, err
		}
	}
	start := &sandboxdv1.Start{
		Policy:  &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Layer: []string{dir}}},
		Command: &sandboxdv1.Command{Argv: []string{"/bin/sh", "-c", "for f in f*; do echo after >> \"$f\"; done"}, Cwd: dir},
	}
	id, err := runLayered(b.ctx, b.cl, start)
	if err != nil {
		if id != "" {
			b.discardAll([]string{id})
		}
		return 0, 0, 0, err
	}
	var diffs []*sandboxdv1.LayerDiff
	diff, err = timed(func() (err error) {
		diffs, err = b.cl.Diff(b.ctx, id, false)
		return err
	})
	if err == nil && (len(diffs) != 1 || len(diffs[0].GetChanges()) != b.cfg.commitFiles) {
		err = fmt.Errorf("the layer of session %s shows %d layers, want 1 with %d changes", id, len(diffs), b.cfg.commitFiles)
	}
	if err != nil {
		b.discardAll([]string{id})
		return 0, 0, 0, err
	}
	commit, err = timed(func() error {
		_, err := b.cl.Commit(b.ctx, id, false)
		return err
	})
	if err != nil {
		b.discardAll([]string{id})
		return 0, 0, 0, err
	}
	copyAll, err = timed(func() error {
		return exec.CommandContext(b.ctx, "cp", "-a", dir, dir+"-copy").Run()
	})
	os.RemoveAll(dir + "-copy")
	return commit, copyAll, diff, err
}

package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/launcher"
	"github.com/sandboxd/sandboxd/layers"
)

// layerSizeEvery is how often a session's layers are measured against
// limits.layer_bytes.
const layerSizeEvery = 500 * time.Millisecond

// layerSizeFailures is how many measures of a session's layers in a row
// may fail (a directory removed as it is read, say) before the session
// ends, as its limit cannot be held.
const layerSizeFailures = 10

// layerStore opens the daemon's layer store (package layers) under its
// state directory when a session first needs it, or at start when a
// previous daemon left one, so that the layers a daemon that died left
// half-made are removed before anything else.
type layerStore struct {
	dir  string
	logf func(string, ...any)

	mu     sync.Mutex
	store  *layers.Store
	err    error
	opened bool
}

func newLayerStore(stateDir string, logf func(string, ...any)) *layerStore {
	ls := &layerStore{logf: logf}
	if stateDir == "" {
		return ls
	}
	ls.dir = filepath.Join(stateDir, "layers")
	if _, err := os.Stat(ls.dir); err == nil {
		ls.get()
	}
	return ls
}

// get is the store, or why there is none.
func (ls *layerStore) get() (*layers.Store, error) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.opened {
		return ls.store, ls.err
	}
	ls.opened = true
	if ls.dir == "" {
		ls.err = fmt.Errorf("%w: the daemon runs without a state directory (--state-dir) to keep them in", layers.ErrUnsupported)
		return nil, ls.err
	}
	var cleaned []string
	ls.store, cleaned, ls.err = layers.Open(ls.dir)
	if len(cleaned) > 0 {
		ls.logf("layers: removed what a daemon that died had left: %v", cleaned)
	}
	if ls.err != nil {
		ls.logf("layers: %v", ls.err)
	}
	return ls.store, ls.err
}

func (ls *layerStore) close() {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.store != nil {
		ls.store.Close()
	}
}

// layerRefusal is the refusal of a launch whose layer of path cannot be
// made.
func layerRefusal(path string, err error) error {
	u := &launcher.Unenforceable{
		Field:     "filesystem.layer",
		Mechanism: "a copy-on-write layer of " + path + ": an overlay the daemon mounts, with its upper layer in the state directory and the path as its lowest layer",
		Found:     err.Error(),
		Remedy:    "run sandboxd as root with --state-dir on a filesystem overlay accepts as upper layer (ext4, xfs, tmpfs), with the layered path on one it accepts as lower; or use --write on a copy of " + path,
	}
	switch {
	case os.Geteuid() != 0:
		u.Remedy = "run sandboxd as root, which can mount overlay over a host path; a rootless daemon cannot. Or use --write on a copy of " + path
	case errors.Is(err, layers.ErrUnmappable):
		u.Remedy = "allow user namespaces, which showing the owner of " + path + " as the sandbox's uid needs; or make " + path + " the sandbox uid's; or use --write on a copy of it"
	}
	if !errors.Is(err, layers.ErrUnsupported) {
		return fmt.Errorf("layer of %s: %w", path, err)
	}
	return u
}

// layerFeature says whether this daemon makes layers: a root daemon with
// a state directory on Linux, for a launch the namespaces set runs. The
// store itself is tried at the first layered launch (or at start, when
// there is one); its failure then is reported here.
func (s *Service) layerFeature(r *sandboxdv1.CapabilitiesReport) *sandboxdv1.FeatureSupport {
	f := &sandboxdv1.FeatureSupport{Feature: "filesystem.layer"}
	namespaces := false
	for _, m := range r.GetMechanismSets() {
		if m.GetName() == "namespaces" && m.GetAvailable() && (r.GetForcedMechanismSet() == "" || r.GetForcedMechanismSet() == "namespaces") {
			namespaces = true
		}
	}
	s.layers.mu.Lock()
	opened, err := s.layers.opened, s.layers.err
	s.layers.mu.Unlock()
	switch {
	case runtime.GOOS != "linux":
		err = fmt.Errorf("%w: they need Linux's overlay filesystem", layers.ErrUnsupported)
	case os.Geteuid() != 0:
		err = fmt.Errorf("%w: the daemon runs as uid %d, not root", layers.ErrUnsupported, os.Geteuid())
	case s.layers.dir == "":
		err = fmt.Errorf("%w: the daemon runs without a state directory", layers.ErrUnsupported)
	case !namespaces:
		err = fmt.Errorf("%w: the namespaces mechanism set is not available, and the landlock set has no mount namespace to show a layer in", layers.ErrUnsupported)
	case opened && err != nil:
	default:
		f.Enforceable, f.MechanismSet = true, "namespaces"
		f.Enforcement = []*sandboxdv1.FieldEnforcement{{Field: "filesystem.layer", Mechanism: "overlay on go.podman.io/storage's overlay driver in " + s.layers.dir + ", a detached mount bound at the path in the sandbox"}}
		return f
	}
	var u *launcher.Unenforceable
	if errors.As(layerRefusal("PATH", err), &u) {
		if !namespaces && runtime.GOOS == "linux" {
			u.Remedy = "allow user namespaces (and do not force --mechanism landlock), so that the namespaces set runs the session; or use --write on a copy of PATH"
		}
		f.Refusal = u.Proto()
	}
	return f
}

// withLayerFrom is the Start's policy with the layered paths of
// start.layer_from's session added, which the caller must be allowed to
// see.
func (s *Service) withLayerFrom(caller Caller, start *sandboxdv1.Start) (*sandboxdv1.Policy, error) {
	from := start.GetLayerFrom()
	if from == "" {
		return start.GetPolicy(), nil
	}
	if err := checkID("layer_from", from); err != nil {
		return nil, err
	}
	if err := s.mayChangeLayers(caller, from, "a start on the layers"); err != nil {
		return nil, err
	}
	infos, err := s.layersOf(caller, from)
	if err != nil {
		return nil, err
	}
	pol := proto.CloneOf(start.GetPolicy())
	if pol == nil {
		pol = &sandboxdv1.Policy{}
	}
	if pol.Filesystem == nil {
		pol.Filesystem = &sandboxdv1.Filesystem{}
	}
	for _, in := range infos {
		if !slices.Contains(pol.Filesystem.Layer, in.Path) {
			pol.Filesystem.Layer = append(pol.Filesystem.Layer, in.Path)
		}
	}
	return pol, nil
}

// checkLayerPaths refuses, for a caller that is not root, layered paths
// it does not own: the daemon reads them as root for a diff, and gives
// what a commit makes there, as root, the path's owner and group.
func checkLayerPaths(c Caller, pol *sandboxdv1.Policy) error {
	if c.UID == 0 || c.SID != "" {
		return nil
	}
	for i, l := range pol.GetFilesystem().GetLayer() {
		owner, err := ownerOf(l)
		if err != nil {
			return &RequestError{Field: fmt.Sprintf("filesystem.layer[%d]", i), Msg: err.Error()}
		}
		if owner != c.UID {
			return fmt.Errorf("filesystem.layer[%d] %s is owned by uid %d, not by the caller (uid %d): only root may layer another's directory, as the daemon reads it as root and a commit gives what it makes there to its owner: %w", i, l, owner, c.UID, ErrPermission)
		}
	}
	return nil
}

// layersOf are session id's layers, if the caller may see them: its
// own, or every one for root and operators. On a session socket there
// are none: a sandbox that may have children cannot have layers.
func (s *Service) layersOf(c Caller, id string) ([]layers.Info, error) {
	st, err := s.layers.get()
	if err != nil {
		return nil, err
	}
	infos, err := st.Of(id)
	if err != nil {
		return nil, err
	}
	v := s.viewOf(c)
	if len(infos) == 0 || v.root != "" || !v.all && infos[0].Owner != v.uid {
		return nil, fmt.Errorf("layers of session %s: %w", quoteID(id), ErrNotFound)
	}
	return infos, nil
}

// makeLayers makes the layers of sess's policy and gives their merged
// directories to spec.
func (s *Service) makeLayers(sess *session, spec *launcher.Spec) error {
	paths := sess.policy.GetFilesystem().GetLayer()
	if len(paths) == 0 {
		return nil
	}
	st, err := s.layers.get()
	if err != nil {
		return layerRefusal(paths[0], err)
	}
	var parents []string
	if sess.layerFrom != "" {
		infos, err := st.Of(sess.layerFrom)
		if err != nil {
			return layerErr(err)
		}
		for _, in := range infos {
			parents = append(parents, in.Path)
		}
	}
	// A commit writes the paths with the owner's ids: its groups are
	// the caller's, the first its primary group (run.go).
	owner := layers.Owner{UID: sess.ownerUID}
	if sess.ownerUID != 0 {
		if len(sess.callerGroups) == 0 {
			return layerRefusal(paths[0], fmt.Errorf("the groups of the session's owner (uid %d) are not known", sess.ownerUID))
		}
		owner.GID, owner.Groups = sess.callerGroups[0], sess.callerGroups
	}
	spec.Layers = map[string]*os.File{}
	for i, p := range paths {
		parent := ""
		if slices.Contains(parents, p) {
			parent = sess.layerFrom
		}
		// Create checks the path's owner again on the directory it
		// makes the layer of: it may have been replaced since
		// checkLayerPaths looked.
		sb := layers.Sandbox{UID: sess.sandboxUID, GID: sess.sandboxGID, OwnPathsOnly: sess.ownerUID != 0}
		_, merged, err := st.Create(sess.id, p, parent, owner, sb)
		if errors.Is(err, layers.ErrBadPath) {
			s.dropLayers(sess)
			return &RequestError{Field: fmt.Sprintf("filesystem.layer[%d]", i), Msg: err.Error()}
		}
		if err != nil {
			s.dropLayers(sess)
			return layerRefusal(p, layerErr(err))
		}
		spec.Layers[p] = merged
	}
	return nil
}

// dropLayers removes the layers of a session that never ran on them.
func (s *Service) dropLayers(sess *session) {
	if len(sess.policy.GetFilesystem().GetLayer()) == 0 {
		return
	}
	if st, err := s.layers.get(); err == nil {
		st.Release(sess.id)
		if err := st.Discard(sess.id); err != nil && !errors.Is(err, layers.ErrNotFound) {
			s.logf("session %s: drop layers: %v", sess.id, err)
		}
	}
}

// releaseLayers unmounts the layers of a session that has ended; they
// stay for review.
func (s *Service) releaseLayers(sess *session) {
	if len(sess.policy.GetFilesystem().GetLayer()) == 0 {
		return
	}
	if st, err := s.layers.get(); err == nil {
		if err := st.Release(sess.id); err != nil {
			s.logf("session %s: %v", sess.id, err)
		}
	}
}

// watchLayerSize ends sess when one of its layers holds more than
// limits.layer_bytes, until stop is called.
func (s *Service) watchLayerSize(sess *session) (stop func()) {
	limit := sess.policy.GetLimits().GetLayerBytes()
	// Only a session with layers may open the store: opening it the
	// first time runs the storage library's overlay probes, which mount
	// in the state directory, and a daemon killed during them leaves
	// those mounts behind.
	if limit == 0 || len(sess.policy.GetFilesystem().GetLayer()) == 0 {
		return func() {}
	}
	st, err := s.layers.get()
	if err != nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(layerSizeEvery)
		defer t.Stop()
		failed := 0
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			infos, err := st.Of(sess.id)
			target := ""
			for _, in := range infos {
				n, serr := st.Size(in.ID)
				if serr != nil {
					err, target = fmt.Errorf("the layer of %s: %w", in.Path, serr), in.Path
					continue
				}
				if uint64(n) <= limit {
					continue
				}
				detail := fmt.Sprintf("the layer of %s holds %d bytes, above limits.layer_bytes %d", in.Path, n, limit)
				sess.denied(&sandboxdv1.Denial{Time: timestamppb.Now(), Field: "limits.layer_bytes", Operation: "write", Target: in.Path, Detail: detail})
				s.end(sess, reasonLimit+": limits.layer_bytes: "+detail)
				return
			}
			if err == nil {
				failed = 0
				continue
			}
			// A sandbox that can keep its layers from being measured
			// (nesting directories beyond PATH_MAX) must not so escape
			// the limit: the session ends.
			if failed++; failed < layerSizeFailures {
				continue
			}
			detail := fmt.Sprintf("the size of the session's layers could not be measured %d times in a row, so limits.layer_bytes cannot be held: %v", failed, err)
			s.logf("session %s: %s", sess.id, detail)
			sess.denied(&sandboxdv1.Denial{Time: timestamppb.Now(), Field: "limits.layer_bytes", Operation: "write", Target: target, Detail: detail})
			s.end(sess, reasonLimit+": limits.layer_bytes: "+detail)
			return
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}

// ListLayers is every layer the caller may see.
func (s *Service) ListLayers(c Caller) ([]*sandboxdv1.Layer, error) {
	v := s.viewOf(c)
	if v.root != "" {
		return nil, nil
	}
	st, err := s.layers.get()
	if errors.Is(err, layers.ErrUnsupported) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	infos, err := st.List()
	if err != nil {
		return nil, err
	}
	var out []*sandboxdv1.Layer
	for _, in := range infos {
		if v.all || in.Owner == v.uid {
			out = append(out, s.layerProto(in))
		}
	}
	return out, nil
}

func (s *Service) layerProto(in layers.Info) *sandboxdv1.Layer {
	s.mu.Lock()
	sess := s.sessions[in.Session]
	s.mu.Unlock()
	active := false
	if sess != nil {
		sess.mu.Lock()
		active = live(sess.state)
		sess.mu.Unlock()
	}
	return &sandboxdv1.Layer{
		SessionId: in.Session, Path: in.Path, ParentSessionId: in.ParentSession,
		SizeBytes: uint64(max(in.Size, 0)), Created: timestamppb.New(in.Created), Active: active, OwnerUid: in.Owner,
	}
}

// Diff is what the layers of session id change.
func (s *Service) Diff(c Caller, id string, patch bool) ([]*sandboxdv1.LayerDiff, error) {
	if _, err := s.layersOf(c, id); err != nil {
		return nil, err
	}
	if patch {
		if err := s.mayChangeLayers(c, id, "a patch of the layers"); err != nil {
			return nil, err
		}
	}
	st, _ := s.layers.get()
	diffs, err := st.Diff(id, patch)
	return s.diffProtos(diffs), layerErr(err)
}

// Commit applies the layers of session id to their paths.
func (s *Service) Commit(c Caller, id string, force bool) ([]*sandboxdv1.LayerDiff, error) {
	if _, err := s.layersOf(c, id); err != nil {
		return nil, err
	}
	if err := s.mayChangeLayers(c, id, "a commit of the layers"); err != nil {
		return nil, err
	}
	st, _ := s.layers.get()
	// Never onto the daemon's own state or sockets: a layer above them
	// shows the sandbox their masks, but what it made where one was
	// missing would land on the host here.
	diffs, err := st.Commit(id, force, slices.Concat(s.protect, s.hiddenSockets()))
	if err == nil {
		s.logf("session %s: layers committed by uid %d (force %v)", id, c.UID, force)
	}
	return s.diffProtos(diffs), layerErr(err)
}

// Discard drops the layers of session id.
func (s *Service) Discard(c Caller, id string) error {
	if _, err := s.layersOf(c, id); err != nil {
		return err
	}
	if err := s.mayChangeLayers(c, id, "a discard of the layers"); err != nil {
		return err
	}
	st, _ := s.layers.get()
	err := st.Discard(id)
	if err == nil {
		s.logf("session %s: layers discarded by uid %d", id, c.UID)
	}
	return layerErr(err)
}

// layerErr maps the layers package's errors to the daemon's.
func layerErr(err error) error {
	var ce *layers.ConflictError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ce), errors.Is(err, layers.ErrBusy):
		return fmt.Errorf("%w: %w", ErrBusy, err)
	case errors.Is(err, layers.ErrNotFound):
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	case errors.Is(err, layers.ErrPathChanged), errors.Is(err, layers.ErrStale):
		return fmt.Errorf("%w: %w", ErrPrecondition, err)
	case errors.Is(err, layers.ErrNotOwner), errors.Is(err, layers.ErrOwnerMayNot):
		return fmt.Errorf("%w: %w", ErrPermission, err)
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT), errors.Is(err, syscall.ENOMEM),
		errors.Is(err, syscall.EMFILE), errors.Is(err, syscall.ENFILE):
		// The state directory's disk or the daemon's memory or
		// descriptors: it may work once layers or sessions go.
		return fmt.Errorf("%w: %w", launcher.ErrHostResources, err)
	}
	return err
}

func (s *Service) diffProtos(diffs []layers.Diff) []*sandboxdv1.LayerDiff {
	var out []*sandboxdv1.LayerDiff
	for _, d := range diffs {
		pd := &sandboxdv1.LayerDiff{Layer: s.layerProto(d.Layer), Patch: d.Patch}
		for _, c := range d.Changes {
			pd.Changes = append(pd.Changes, &sandboxdv1.Change{
				Path: c.Path, Kind: changeKind[c.Kind], Type: c.Type,
				OldMode: uint32(c.OldMode.Perm()), NewMode: uint32(c.NewMode.Perm()), Size: uint64(max(c.Size, 0)),
			})
		}
		out = append(out, pd)
	}
	return out
}

var changeKind = map[layers.Kind]sandboxdv1.Change_Kind{
	layers.Added: sandboxdv1.Change_ADDED, layers.Modified: sandboxdv1.Change_MODIFIED,
	layers.Deleted: sandboxdv1.Change_DELETED, layers.ModeChanged: sandboxdv1.Change_MODE,
}

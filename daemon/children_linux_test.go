package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sandboxd/sandboxd/api/record"
	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/api/sandboxd/v1/sandboxdv1grpc"
	"github.com/sandboxd/sandboxd/internal/auditlog"
	"github.com/sandboxd/sandboxd/launcher"
	"github.com/sandboxd/sandboxd/policy"
)

// attachTo opens a stream that attaches to session id.
func (h *harness) attachTo(client sandboxdv1grpc.SandboxdClient, att *sandboxdv1.Attach) *clientSession {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	h.t.Cleanup(cancel)
	stream, err := client.Session(ctx)
	if err != nil {
		h.t.Fatalf("Session: %v", err)
	}
	if err := stream.Send(&sandboxdv1.SessionRequest{Msg: &sandboxdv1.SessionRequest_Attach{Attach: att}}); err != nil {
		h.t.Fatalf("send Attach: %v", err)
	}
	return &clientSession{t: h.t, stream: stream, cancel: cancel}
}

// openOn starts a session through client, e.g. a session socket's.
func (h *harness) openOn(client sandboxdv1grpc.SandboxdClient, start *sandboxdv1.Start) *clientSession {
	saved := h.client
	h.client = client
	defer func() { h.client = saved }()
	return h.open(start)
}

// dial connects to a socket the way a sandboxed client would.
func (h *harness) dial(path string) sandboxdv1grpc.SandboxdClient {
	h.t.Helper()
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { conn.Close() })
	return sandboxdv1grpc.NewSandboxdClient(conn)
}

func (h *harness) inspect(id string) *sandboxdv1.SessionInfo {
	h.t.Helper()
	info, err := h.client.Inspect(ctxT(h.t), &sandboxdv1.InspectRequest{Id: id})
	if err != nil {
		h.t.Fatalf("Inspect %s: %v", id, err)
	}
	return info
}

// waitState polls Inspect until session id is in state.
func (h *harness) waitState(id string, state sandboxdv1.State) *sandboxdv1.SessionInfo {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		info := h.inspect(id)
		if info.GetState() == state {
			return info
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("session %s is %v, want %v", id, info.GetState(), state)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func envOf(spec []string, key string) (string, bool) {
	for _, kv := range spec {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v, true
		}
	}
	return "", false
}

func detached(start *sandboxdv1.Start) *sandboxdv1.Start {
	start.Detach = true
	return start
}

func TestDetachedSessionOutlivesItsStreamAndReplaysOnAttach(t *testing.T) {
	h := startDaemon(t)
	s := h.open(detached(sh("echo before; read line; echo got $line; exit 4"))).finish()
	if s.err != nil || s.started == nil || s.exit != nil {
		t.Fatalf("detached start: started %v exit %v err %v, want Started and the end of the stream", s.started, s.exit, s.err)
	}
	id := s.started.GetSessionId()
	info := h.waitState(id, sandboxdv1.State_RUNNING)
	if !info.GetDetached() || info.GetViewers() != 0 {
		t.Fatalf("detached %v viewers %d, want a detached session nobody watches", info.GetDetached(), info.GetViewers())
	}

	watcher := h.attachTo(h.client, &sandboxdv1.Attach{Id: id, ReadOnly: true})
	watcher.waitStdout("before\n")
	if watcher.started.GetPolicyDigest() != info.GetPolicyDigest() {
		t.Fatalf("attach Started digest %q, Inspect %q", watcher.started.GetPolicyDigest(), info.GetPolicyDigest())
	}
	typist := h.attachTo(h.client, &sandboxdv1.Attach{Id: id})
	typist.waitStdout("before\n")
	// A second interactive client is refused while the first holds the input.
	other := h.attachTo(h.client, &sandboxdv1.Attach{Id: id}).finish()
	wantCode(t, other.err, codes.FailedPrecondition, "interactive")
	// The read-only watcher's input never reaches the session.
	watcher.stdin("from the watcher\n", false)
	typist.stdin("hello\n", false)
	typist.finish()
	watcher.finish()
	for _, c := range []*clientSession{typist, watcher} {
		wantExit(t, c, sandboxdv1.State_EXITED, 4, 0, "")
		if got := c.stdout.String(); got != "before\ngot hello\n" {
			t.Errorf("viewer saw %q", got)
		}
	}
	// An ended session still replays, then exits at once.
	late := h.attachTo(h.client, &sandboxdv1.Attach{Id: id, ReadOnly: true}).finish()
	wantExit(t, late, sandboxdv1.State_EXITED, 4, 0, "")
	if got := late.stdout.String(); got != "before\ngot hello\n" {
		t.Errorf("replay after the end %q", got)
	}
}

// Attach's Started, as Start's, leaves the report out only when the
// client asks (every client before the field gets it), whatever the kind
// of attach and whether the session still runs.
func TestAttachStartedCarriesTheReportUnlessOmitted(t *testing.T) {
	h := startDaemon(t)
	wantReport := func(what string, omit bool, a *clientSession) {
		t.Helper()
		a.waitStarted()
		if got := a.started.GetEnforcement(); omit != (got == nil) || !omit && got.GetBackend() != "fake" {
			t.Errorf("%s, omit_enforcement %v: Started's report %v", what, omit, got)
		}
		if a.started.GetSessionId() == "" || a.started.GetPolicyDigest() == "" {
			t.Errorf("%s, omit_enforcement %v: Started = %v", what, omit, a.started)
		}
	}
	for _, omit := range []bool{false, true} {
		s := h.open(detached(sh("echo up; read line; exit 3"))).finish()
		id := s.started.GetSessionId()
		h.waitState(id, sandboxdv1.State_RUNNING)

		watcher := h.attachTo(h.client, &sandboxdv1.Attach{Id: id, ReadOnly: true, OmitEnforcement: omit})
		wantReport("read-only", omit, watcher)
		replay := h.attachTo(h.client, &sandboxdv1.Attach{Id: id, ReplayOnly: true, OmitEnforcement: omit}).finish()
		wantReport("replay-only", omit, replay)
		typist := h.attachTo(h.client, &sandboxdv1.Attach{Id: id, OmitEnforcement: omit})
		wantReport("interactive", omit, typist)
		typist.stdin("go\n", true)
		for _, c := range []*clientSession{typist.finish(), watcher.finish()} {
			wantExit(t, c, sandboxdv1.State_EXITED, 3, 0, "")
		}

		late := h.attachTo(h.client, &sandboxdv1.Attach{Id: id, ReadOnly: true, OmitEnforcement: omit}).finish()
		wantReport("ended session", omit, late)
		wantExit(t, late, sandboxdv1.State_EXITED, 3, 0, "")
		if h.inspect(id).GetEnforcement().GetBackend() != "fake" {
			t.Errorf("omit_enforcement %v: Inspect lost the report", omit)
		}
	}
}

func TestScrollbackIsBounded(t *testing.T) {
	h := startDaemon(t, func(c *Config) { c.ScrollbackBytes = 1000 })
	s := h.open(detached(sh("seq 1 2000"))).finish()
	id := s.started.GetSessionId()
	h.waitState(id, sandboxdv1.State_EXITED)
	a := h.attachTo(h.client, &sandboxdv1.Attach{Id: id, ReadOnly: true}).finish()
	wantExit(t, a, sandboxdv1.State_EXITED, 0, 0, "")
	replay := a.stdout.String()
	if len(replay) != 1000 || !strings.HasSuffix(replay, "1999\n2000\n") {
		t.Fatalf("replay of %d bytes ending %q, want the newest 1000 bytes", len(replay), replay[max(0, len(replay)-20):])
	}
}

func TestOwnerLeavingKillsOnlyUndetachedSessions(t *testing.T) {
	h := startDaemon(t)
	s := h.open(cmd("/bin/sleep", "30"))
	s.waitStarted()
	id := s.started.GetSessionId()
	watcher := h.attachTo(h.client, &sandboxdv1.Attach{Id: id, ReadOnly: true})
	watcher.waitStarted()
	if v := h.inspect(id).GetViewers(); v != 2 {
		t.Fatalf("viewers %d, want the owner and the watcher", v)
	}
	// A watcher leaving changes nothing; the owner leaving ends it.
	watcher.cancel()
	s.cancel()
	info := h.waitState(id, sandboxdv1.State_KILLED)
	if info.GetReason() != reasonDisconnected {
		t.Fatalf("reason %q", info.GetReason())
	}
}

// childPolicy is a parent policy that may have children, with network
// none and one write root.
func childPolicy(write string) *sandboxdv1.Policy {
	return &sandboxdv1.Policy{
		Filesystem: &sandboxdv1.Filesystem{Write: []string{write}},
		Network:    &sandboxdv1.Network{Mode: sandboxdv1.Network_NONE},
		Limits:     &sandboxdv1.Limits{Timeout: durationpb.New(time.Minute)},
		Children:   &sandboxdv1.Children{Allow: true},
	}
}

func TestSessionSocketStartsNarrowedChildrenAndSeesItsSubtree(t *testing.T) {
	h := startDaemon(t)
	work := t.TempDir()
	start := sh("exec sleep 60")
	start.Policy = childPolicy(work)
	parent := h.open(start)
	parent.waitStarted()
	pid := parent.started.GetSessionId()
	spec := h.backend.lastSpec()
	if spec.SessionSocket == "" || filepath.Dir(spec.SessionSocket) != h.svc.cfg.SessionSocketDir {
		t.Fatalf("SessionSocket %q, want one in the sessions directory", spec.SessionSocket)
	}
	if got, ok := envOf(spec.Env, envSocket); !ok || got != spec.SessionSocket {
		t.Fatalf("%s=%q, want the session socket %q (a backend without a placer shows the host path)", envSocket, got, spec.SessionSocket)
	}
	if fi, err := os.Stat(spec.SessionSocket); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("session socket: %v %v, want mode 0600", fi, err)
	}
	// Someone else's session, which the parent must not see.
	other := h.open(cmd("/bin/sleep", "60"))
	other.waitStarted()

	inside := h.dial(spec.SessionSocket)

	// No policy: exactly the parent's, but for the time the parent has
	// left.
	child := h.openOn(inside, detached(sh("exec sleep 60"))).finish()
	if child.err != nil {
		t.Fatalf("child: %v", child.err)
	}
	cid := child.started.GetSessionId()
	cinfo := h.inspect(cid)
	pinfo := h.inspect(pid)
	left := cinfo.GetPolicy().GetLimits().GetTimeout().AsDuration()
	if left <= 0 || left > pinfo.GetPolicy().GetLimits().GetTimeout().AsDuration() {
		t.Fatalf("child timeout %v, want what is left of the parent's %v", left, pinfo.GetPolicy().GetLimits().GetTimeout().AsDuration())
	}
	same := proto.CloneOf(cinfo.GetPolicy())
	same.Limits.Timeout = pinfo.GetPolicy().GetLimits().GetTimeout()
	if cinfo.GetParentId() != pid || policy.Digest(same) != parent.started.GetPolicyDigest() {
		t.Fatalf("child parent %q policy %v, want parent %q and its policy %v", cinfo.GetParentId(), cinfo.GetPolicy(), pid, pinfo.GetPolicy())
	}
	if got, _ := envOf(h.backend.lastSpec().Env, envDigest); got != cinfo.GetPolicyDigest() {
		t.Fatalf("child's %s %q, Inspect says %q", envDigest, got, cinfo.GetPolicyDigest())
	}
	for _, sp := range h.backend.allSpecs() {
		if sp.SessionID == cid && sp.ParentMechanismSet != fakeMechanismSet {
			t.Fatalf("child's ParentMechanismSet %q, want its parent's %q", sp.ParentMechanismSet, fakeMechanismSet)
		}
	}
	if cinfo.GetOwnerUid() != uint32(os.Getuid()) {
		t.Fatalf("child owner %d, want the root session's owner", cinfo.GetOwnerUid())
	}

	// Widening is refused, naming the field.
	for _, tc := range []struct {
		field string
		pol   *sandboxdv1.Policy
	}{
		{"network.mode", &sandboxdv1.Policy{Network: &sandboxdv1.Network{Mode: sandboxdv1.Network_HOST}}},
		{"filesystem.write[0]", &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{"/var/tmp"}}}},
		{"limits.timeout", &sandboxdv1.Policy{Limits: &sandboxdv1.Limits{Timeout: durationpb.New(time.Hour)}}},
	} {
		s := cmd("/bin/true")
		s.Policy = tc.pol
		r := h.openOn(inside, s).finish()
		wantCode(t, r.err, codes.PermissionDenied, tc.field)
	}
	// A narrower one is fine, and it is what runs.
	narrower := sh("exec sleep 60")
	narrower.Policy = &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{filepath.Join(work, "sub")}}, Children: &sandboxdv1.Children{Allow: false}}
	n := h.openOn(inside, detached(narrower)).finish()
	if n.err != nil {
		t.Fatalf("narrower child: %v", n.err)
	}
	nspec := h.backend.lastSpec()
	if w := nspec.Policy.GetFilesystem().GetWrite(); !slices.Equal(w, []string{filepath.Join(work, "sub")}) || nspec.SessionSocket != "" {
		t.Fatalf("narrower child writes %q with session socket %q", w, nspec.SessionSocket)
	}
	if _, ok := envOf(nspec.Env, envSocket); ok {
		t.Fatalf("a child without children.allow got %s", envSocket)
	}

	// Grandchild through the child's own socket.
	grandSocket := ""
	for _, sp := range h.backend.allSpecs() {
		if sp.SessionID == cid {
			grandSocket = sp.SessionSocket
		}
	}
	if grandSocket == "" {
		t.Fatal("the child, which inherited children.allow, got no socket")
	}
	grand := h.openOn(h.dial(grandSocket), detached(sh("exec sleep 60"))).finish()
	if grand.err != nil {
		t.Fatalf("grandchild: %v", grand.err)
	}
	gid := grand.started.GetSessionId()
	if h.inspect(gid).GetParentId() != cid {
		t.Fatal("grandchild's parent is not the child")
	}

	// The parent's socket sees its subtree and nothing else.
	list, err := inside.List(ctxT(t), &sandboxdv1.ListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range list.GetSessions() {
		ids = append(ids, s.GetId())
	}
	slices.Sort(ids)
	want := []string{pid, cid, n.started.GetSessionId(), gid}
	slices.Sort(want)
	if !slices.Equal(ids, want) {
		t.Fatalf("session socket lists %q, want its subtree %q", ids, want)
	}
	oid := other.started.GetSessionId()
	_, err = inside.Inspect(ctxT(t), &sandboxdv1.InspectRequest{Id: oid})
	wantCode(t, err, codes.NotFound, oid)
	_, err = inside.Kill(ctxT(t), &sandboxdv1.KillRequest{Id: oid})
	wantCode(t, err, codes.NotFound, oid)
	a := h.attachTo(inside, &sandboxdv1.Attach{Id: oid, ReadOnly: true}).finish()
	wantCode(t, a.err, codes.NotFound, oid)
	self := h.attachTo(inside, &sandboxdv1.Attach{Id: pid, ReadOnly: true}).finish()
	wantCode(t, self.err, codes.InvalidArgument, "itself")
	// The grandchild's socket does not see its parent.
	_, err = h.dial(grandSocket).Inspect(ctxT(t), &sandboxdv1.InspectRequest{Id: pid})
	wantCode(t, err, codes.NotFound, pid)

	// Killing the child kills the grandchild; the parent stays.
	if _, err := inside.Kill(ctxT(t), &sandboxdv1.KillRequest{Id: cid}); err != nil {
		t.Fatal(err)
	}
	h.waitState(cid, sandboxdv1.State_KILLED)
	h.waitState(gid, sandboxdv1.State_KILLED)
	if st := h.inspect(pid).GetState(); st != sandboxdv1.State_RUNNING {
		t.Fatalf("parent %v after killing its child", st)
	}
	// The parent's end ends what is left of its subtree and its socket.
	if _, err := h.client.Kill(ctxT(t), &sandboxdv1.KillRequest{Id: pid}); err != nil {
		t.Fatal(err)
	}
	parent.finish()
	info := h.waitState(n.started.GetSessionId(), sandboxdv1.State_KILLED)
	if info.GetReason() != reasonOperator && info.GetReason() != reasonParentEnded {
		t.Fatalf("subtree member ended %q", info.GetReason())
	}
	if _, err := os.Stat(spec.SessionSocket); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("session socket after the session: %v", err)
	}
	if st := h.inspect(oid).GetState(); st != sandboxdv1.State_RUNNING {
		t.Fatalf("an unrelated session is %v", st)
	}
}

func TestParentExitEndsItsChildren(t *testing.T) {
	h := startDaemon(t)
	start := sh("read x")
	start.Policy = childPolicy(t.TempDir())
	parent := h.open(start)
	parent.waitStarted()
	inside := h.dial(h.backend.lastSpec().SessionSocket)
	child := h.openOn(inside, detached(cmd("/bin/sleep", "60"))).finish()
	parent.stdin("\n", true)
	parent.finish()
	wantExit(t, parent, sandboxdv1.State_EXITED, 0, 0, "")
	info := h.waitState(child.started.GetSessionId(), sandboxdv1.State_KILLED)
	if info.GetReason() != reasonParentEnded {
		t.Fatalf("child ended %q, want %q", info.GetReason(), reasonParentEnded)
	}
}

func TestChildrenNeedTheParentsPermission(t *testing.T) {
	h := startDaemon(t)
	start := sh("exec sleep 60")
	start.Policy = childPolicy(t.TempDir())
	start.Policy.Children = nil
	s := h.open(start)
	s.waitStarted()
	spec := h.backend.lastSpec()
	if spec.SessionSocket != "" {
		t.Fatalf("a session without children.allow got socket %q", spec.SessionSocket)
	}
	if _, ok := envOf(spec.Env, envSocket); ok {
		t.Fatalf("a session without children.allow got %s", envSocket)
	}
	bad := sh("true")
	bad.Command.Env = map[string]string{envSocket: h.socket}
	r := h.open(bad).finish()
	wantCode(t, r.err, codes.InvalidArgument, envSocket)
}

func TestChildrenNeedASocketToBeServedOn(t *testing.T) {
	svc, err := New(Config{Backend: &fakeBackend{}})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = svc.prepare(context.Background(), Caller{UID: 1000, GID: 1000}, &sandboxdv1.Start{Policy: childPolicy("/tmp"), Command: &sandboxdv1.Command{Argv: []string{"true"}}})
	wantCode(t, toStatus(err), codes.FailedPrecondition, "children.allow")
}

func TestNarrowedPolicyIsTheParentsWhenNoneIsAsked(t *testing.T) {
	parent := policy.Normalize(childPolicy("/work"))
	got, err := policy.Narrow(parent, &sandboxdv1.Policy{})
	if err != nil || policy.Digest(got) != policy.Digest(parent) {
		t.Fatalf("Narrow(parent, empty) = %v, %v", got, err)
	}
}

// A child the daemon no longer keeps is gone from its parent's children
// too, and once none is kept nothing of them is.
func TestForgottenChildrenLeaveTheirParent(t *testing.T) {
	h := startDaemon(t, func(c *Config) { c.RetainEnded = 1 })
	start := sh("read x")
	start.Policy = childPolicy(t.TempDir())
	parent := h.open(start)
	parent.waitStarted()
	parentID := parent.started.GetSessionId()
	inside := h.dial(h.backend.lastSpec().SessionSocket)
	var ids []string
	for range 2 {
		c := h.openOn(inside, cmd("/bin/true")).finish()
		wantExit(t, c, sandboxdv1.State_EXITED, 0, 0, "")
		ids = append(ids, c.started.GetSessionId())
	}
	children := func() []string {
		h.svc.mu.Lock()
		defer h.svc.mu.Unlock()
		var out []string
		for _, c := range h.svc.children[parentID] {
			out = append(out, c.id)
		}
		return out
	}
	// One ended session is kept per owner: the first child is forgotten
	// once the second has ended, which is after its client has the Exit.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		got := children()
		if slices.Equal(got, ids[1:]) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("children of the parent: %v, want %v", got, ids[1:])
		}
	}
	parent.stdin("\n", true)
	parent.finish()
	wantExit(t, parent, sandboxdv1.State_EXITED, 0, 0, "")
	for deadline := time.Now().Add(10 * time.Second); len(children()) != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("children kept after every child was forgotten: %v", children())
		}
	}
}

// A daemon embedding Serve, with a listener of its own, makes the session
// sockets' directory before any session as ListenAndServe does, removing
// a socket a daemon that died left there but not one a listener holds
// (its directory may be a running daemon's); a symlink in its place is
// refused before anything is served. Made with the first session that
// allows children, it could be made first by a sandbox with a write root
// above it.
func TestServeMakesTheSessionSocketDir(t *testing.T) {
	var dir string
	h := startDaemon(t, func(c *Config) {
		dir = c.SessionSocketDir
		if err := os.Mkdir(dir, 0o711); err != nil {
			t.Fatal(err)
		}
		dead, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(dir, "dead.sock"), Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		dead.SetUnlinkOnClose(false)
		dead.Close()
		live, err := net.Listen("unix", filepath.Join(dir, "live.sock"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { live.Close() })
	})
	// Answered, so Serve is serving.
	if _, err := h.client.List(ctxT(t), &sandboxdv1.ListRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "dead.sock")); err == nil {
		t.Error("Serve left the stale socket of a daemon that died")
	}
	if _, err := os.Lstat(filepath.Join(dir, "live.sock")); err != nil {
		t.Errorf("Serve removed a live session socket in the directory: %v", err)
	}

	// A daemon serving for an instant, with the directory missing and
	// with a symlink in its place.
	serve := func(dir string) error {
		svc, err := New(Config{Backend: &fakeBackend{}, SessionSocketDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		lis, err := net.Listen("unix", filepath.Join(t.TempDir(), "d.sock"))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return svc.Serve(ctx, lis)
	}
	missing := filepath.Join(t.TempDir(), "s")
	if err := serve(missing); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(missing); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o711 {
		t.Errorf("session sockets' directory after Serve: %v, %v; want a directory of mode 0711", fi, err)
	}
	linked := filepath.Join(t.TempDir(), "s")
	if err := os.Symlink(t.TempDir(), linked); err != nil {
		t.Fatal(err)
	}
	if err := serve(linked); err == nil {
		t.Error("Serve took a symlink for the session sockets' directory")
	}
}

// holdStarts makes the fake backend's Start of every session whose spec
// hold says so wait until the returned release is called; started gets
// each held spec as its Start begins to wait.
func (h *harness) holdStarts(hold func(launcher.Spec) bool) (started <-chan launcher.Spec, release func()) {
	gate := make(chan struct{})
	ch := make(chan launcher.Spec, 4)
	h.backend.mu.Lock()
	h.backend.gate = func(_ context.Context, spec launcher.Spec) error {
		if hold(spec) {
			ch <- spec
			<-gate
		}
		return nil
	}
	h.backend.mu.Unlock()
	var once sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	h.t.Cleanup(release)
	return ch, release
}

// A child still STARTING when its parent ends, or when an operator kills
// it, is killed as soon as its launch is over, with that reason: it does
// not run on outside a tree that has ended.
func TestStartingChildIsKilledWithItsParent(t *testing.T) {
	h := startDaemon(t)
	start := sh("read x")
	start.Policy = childPolicy(t.TempDir())
	parent := h.open(start)
	parent.waitStarted()
	pid := parent.started.GetSessionId()
	inside := h.dial(h.backend.lastSpec().SessionSocket)
	started, release := h.holdStarts(func(spec launcher.Spec) bool { return spec.ParentSessionID == pid })
	child := make(chan *clientSession, 1)
	go func() { child <- h.openOn(inside, detached(cmd("/bin/sleep", "60"))).finish() }()
	spec := <-started
	parent.stdin("\n", true)
	parent.finish()
	wantExit(t, parent, sandboxdv1.State_EXITED, 0, 0, "")
	release()
	c := <-child
	if c.err != nil {
		t.Fatalf("child: %v", c.err)
	}
	info := h.waitState(spec.SessionID, sandboxdv1.State_KILLED)
	if info.GetReason() != reasonParentEnded {
		t.Fatalf("child ended %q, want %q", info.GetReason(), reasonParentEnded)
	}

	// An operator's kill of a session still starting.
	started, release = h.holdStarts(func(launcher.Spec) bool { return true })
	s := make(chan *clientSession, 1)
	go func() { s <- h.open(detached(cmd("/bin/sleep", "60"))).finish() }()
	spec = <-started
	if _, err := h.client.Kill(ctxT(t), &sandboxdv1.KillRequest{Id: spec.SessionID}); err != nil {
		t.Fatalf("Kill of a starting session: %v", err)
	}
	release()
	if r := <-s; r.err != nil {
		t.Fatalf("start: %v", r.err)
	}
	if info := h.waitState(spec.SessionID, sandboxdv1.State_KILLED); info.GetReason() != reasonOperator {
		t.Fatalf("killed while starting: ended %q, want %q", info.GetReason(), reasonOperator)
	}
}

// A child asked for while its parent's launch is not over yet waits for
// it, is built with the parent's mechanism set, and gets no more than the
// time its parent has left.
func TestChildOfAStartingParentIsWithinItsTime(t *testing.T) {
	h := startDaemon(t)
	start := sh("exec sleep 60")
	start.Policy = childPolicy(t.TempDir())
	started, release := h.holdStarts(func(spec launcher.Spec) bool { return spec.ParentSessionID == "" })
	parent := h.open(start)
	spec := <-started
	time.Sleep(20 * time.Millisecond)
	c := h.openOn(h.dial(spec.SessionSocket), detached(cmd("/bin/true")))
	// The child waits for its parent's launch: planned before it, it
	// would have no parent's mechanism set to be built with.
	time.Sleep(100 * time.Millisecond)
	if sp := h.backend.lastSpec(); sp.ParentSessionID == spec.SessionID {
		t.Fatal("the child was launched while its parent was starting")
	}
	release()
	parent.waitStarted()
	var child launcher.Spec
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if sp := h.backend.lastSpec(); sp.ParentSessionID == spec.SessionID {
			child = sp
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the child was not launched")
		}
	}
	if r := c.finish(); r.err != nil {
		t.Fatalf("child: %v", r.err)
	}
	if child.ParentMechanismSet != fakeMechanismSet {
		t.Errorf("child's ParentMechanismSet %q, want its parent's %q", child.ParentMechanismSet, fakeMechanismSet)
	}
	full := spec.Policy.GetLimits().GetTimeout().AsDuration()
	if got := child.Policy.GetLimits().GetTimeout().AsDuration(); got <= 0 || got > full-120*time.Millisecond {
		t.Fatalf("child timeout %v, want at most what the parent (%v) had left", got, full)
	}
}

// A child asked for while its parent starts, whose launch then fails, is
// refused as having no running parent, not planned without the parent's
// mechanism set.
func TestChildOfAParentThatFailsToStartIsRefused(t *testing.T) {
	h := startDaemon(t)
	start := cmd("/nonexistent/program")
	start.Policy = childPolicy(t.TempDir())
	started, release := h.holdStarts(func(spec launcher.Spec) bool { return spec.ParentSessionID == "" })
	h.open(start)
	spec := <-started
	c := h.openOn(h.dial(spec.SessionSocket), detached(cmd("/bin/true")))
	time.Sleep(50 * time.Millisecond)
	release()
	r := c.finish()
	wantCode(t, r.err, codes.FailedPrecondition, "is not running")
	if sp := h.backend.lastSpec(); sp.ParentSessionID == spec.SessionID {
		t.Error("the child of a parent that failed to start was launched")
	}
}

// Every session of a tree counts against its owner's quota of sessions,
// not only against the socket it was asked for on: a tree of sockets each
// with its own quota would give a user that quota to the power of its
// depth.
func TestSessionTreeCountsAgainstItsOwnersQuota(t *testing.T) {
	h := startDaemon(t, func(c *Config) { c.Quotas.Sessions = 3 })
	start := sh("exec sleep 60")
	start.Policy = childPolicy(t.TempDir())
	parent := h.open(start)
	parent.waitStarted()
	inside := h.dial(h.backend.lastSpec().SessionSocket)
	child := h.openOn(inside, detached(sh("exec sleep 60"))).finish()
	if child.err != nil {
		t.Fatalf("first child: %v", child.err)
	}
	childSocket := h.backend.lastSpec().SessionSocket
	second := h.openOn(inside, detached(sh("exec sleep 60"))).finish()
	if second.err != nil {
		t.Fatalf("second child: %v", second.err)
	}
	// The owner's fourth session: a grandchild, on a socket that has
	// started nothing yet.
	grand := h.openOn(h.dial(childSocket), detached(sh("exec sleep 60"))).finish()
	wantCode(t, grand.err, codes.ResourceExhausted, "--max-sessions")
	if u := h.svc.quotas.usage("uid " + strconv.Itoa(os.Getuid())); u.sessions != 3 {
		t.Errorf("owner holds %d sessions, want the tree's 3", u.sessions)
	}
	if _, err := h.client.Kill(ctxT(t), &sandboxdv1.KillRequest{Id: parent.started.GetSessionId()}); err != nil {
		t.Fatal(err)
	}
	parent.finish()
	for deadline := time.Now().Add(10 * time.Second); h.svc.quotas.usage("uid "+strconv.Itoa(os.Getuid())).sessions != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the owner still holds %d sessions after its tree ended", h.svc.quotas.usage("uid "+strconv.Itoa(os.Getuid())).sessions)
		}
	}
}

// hangStarts makes the fake backend's Start of every session whose spec
// hold says so hang until its context is done, as the Linux backend's
// does while its init is blocked in setup (it kills the init then);
// started gets each such spec as its Start begins to hang.
func (h *harness) hangStarts(hold func(launcher.Spec) bool) (started <-chan launcher.Spec) {
	over := make(chan struct{})
	h.t.Cleanup(func() { close(over) })
	ch := make(chan launcher.Spec, 4)
	h.backend.mu.Lock()
	h.backend.gate = func(ctx context.Context, spec launcher.Spec) error {
		if !hold(spec) {
			return nil
		}
		ch <- spec
		select {
		case <-ctx.Done():
			return fmt.Errorf("sandbox setup abandoned: %w", context.Cause(ctx))
		case <-over:
			return errors.New("the test is over")
		}
	}
	h.backend.mu.Unlock()
	return ch
}

// within returns what ch gives, failing the test if the daemon has not
// given it within 10 s: what is waited for happens at once when it does.
func within[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: not within 10s", what)
		panic("unreachable")
	}
}

// A kill of a session whose launch hangs abandons the launch: the session
// ends KILLED with the kill's reason (the audit log records it as any
// kill), and a child waiting for that launch is refused, without waiting
// for a launch that may never return. Its timeout and the daemon's
// shutdown end it likewise.
func TestKillOfAHungLaunchEndsIt(t *testing.T) {
	state := t.TempDir()
	h := startDaemon(t, func(c *Config) { c.StateDir = state })
	started := h.hangStarts(func(spec launcher.Spec) bool { return spec.ParentSessionID == "" })
	start := detached(cmd("/bin/sleep", "60"))
	start.Policy = childPolicy(t.TempDir())
	s := make(chan *clientSession, 1)
	go func() { s <- h.open(start).finish() }()
	spec := within(t, started, "launch")
	child := make(chan *clientSession, 1)
	go func() { child <- h.openOn(h.dial(spec.SessionSocket), detached(cmd("/bin/true"))).finish() }()
	h.svc.mu.Lock()
	parent := h.svc.sessions[spec.SessionID]
	h.svc.mu.Unlock()
	for waiting := false; !waiting; time.Sleep(5 * time.Millisecond) {
		parent.mu.Lock()
		waiting = parent.launched != nil
		parent.mu.Unlock()
	}
	if _, err := h.client.Kill(ctxT(t), &sandboxdv1.KillRequest{Id: spec.SessionID}); err != nil {
		t.Fatalf("Kill of a starting session: %v", err)
	}
	wantExit(t, within(t, s, "the killed launch's Exit"), sandboxdv1.State_KILLED, 0, 9, reasonOperator)
	if info := h.inspect(spec.SessionID); info.GetState() != sandboxdv1.State_KILLED || info.GetReason() != reasonOperator {
		t.Errorf("killed while starting: %v %q", info.GetState(), info.GetReason())
	}
	if c := within(t, child, "the waiting child's answer"); c.err == nil || status.Code(c.err) != codes.FailedPrecondition {
		t.Errorf("child of a parent killed while starting: exit %v, err %v", c.exit, c.err)
	}
	var audited bool
	for deadline := time.Now().Add(10 * time.Second); !audited && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		err := auditlog.Read(state, func(line []byte) error {
			var r record.Event
			if err := json.Unmarshal(line, &r); err != nil {
				return err
			}
			audited = audited || r.Session == spec.SessionID && r.Type == "state" && r.From == "starting" && r.To == "killed" && r.Reason == reasonOperator
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if !audited {
		t.Error("the audit log has no kill of the session killed while starting")
	}

	start = detached(cmd("/bin/sleep", "60"))
	start.Policy = &sandboxdv1.Policy{Limits: &sandboxdv1.Limits{Timeout: durationpb.New(50 * time.Millisecond)}}
	go func() { s <- h.open(start).finish() }()
	within(t, started, "launch")
	wantExit(t, within(t, s, "the timed-out launch's Exit"), sandboxdv1.State_KILLED, 0, 9, reasonTimeout)

	// The daemon's shutdown ends a hung launch too, rather than wait for it.
	go func() { s <- h.open(detached(cmd("/bin/sleep", "60"))).finish() }()
	within(t, started, "launch")
	stopped := make(chan struct{})
	go func() {
		h.stop()
		close(stopped)
	}()
	wantExit(t, within(t, s, "the Exit of a launch hung at shutdown"), sandboxdv1.State_KILLED, 0, 9, reasonShutdown)
	within(t, stopped, "the daemon's stop")
}

// A child waiting for its parent's launch is refused as soon as the
// parent is killed, even while that launch is stuck in a step that heeds
// no kill until it returns (the Linux backend's ID-mapped trees, cgroup
// and init before it watches for one): the child does not wait for the
// step.
func TestChildOfAParentKilledWhileStartingIsRefusedAtOnce(t *testing.T) {
	h := startDaemon(t)
	started, release := h.holdStarts(func(spec launcher.Spec) bool { return spec.ParentSessionID == "" })
	start := detached(cmd("/bin/sleep", "60"))
	start.Policy = childPolicy(t.TempDir())
	s := make(chan *clientSession, 1)
	go func() { s <- h.open(start).finish() }()
	spec := within(t, started, "launch")
	child := make(chan *clientSession, 1)
	go func() { child <- h.openOn(h.dial(spec.SessionSocket), detached(cmd("/bin/true"))).finish() }()
	h.svc.mu.Lock()
	parent := h.svc.sessions[spec.SessionID]
	h.svc.mu.Unlock()
	for waiting := false; !waiting; time.Sleep(5 * time.Millisecond) {
		parent.mu.Lock()
		waiting = parent.launched != nil
		parent.mu.Unlock()
	}
	if _, err := h.client.Kill(ctxT(t), &sandboxdv1.KillRequest{Id: spec.SessionID}); err != nil {
		t.Fatalf("Kill of a starting session: %v", err)
	}
	c := within(t, child, "the answer of a child waiting for a killed launch")
	wantCode(t, c.err, codes.FailedPrecondition, "is not running")
	release()
	if r := within(t, s, "the killed session's Started"); r.err != nil {
		t.Fatalf("start: %v", r.err)
	}
	if info := h.waitState(spec.SessionID, sandboxdv1.State_KILLED); info.GetReason() != reasonOperator {
		t.Errorf("killed while starting: ended %q, want %q", info.GetReason(), reasonOperator)
	}
	if sp := h.backend.lastSpec(); sp.ParentSessionID == spec.SessionID {
		t.Error("the child of a parent killed while starting was launched")
	}
}

// killAtStartRecord starts a session and kills it while its launch waits
// in recordStart (a test sink holds the audit health's lock from the
// session's start record on), then lets the launch go on with health as
// the audit log's. It returns the session's id and its client's answer.
func (h *harness) killAtStartRecord(health error) (string, <-chan *clientSession) {
	h.t.Helper()
	ids := make(chan string, 1)
	h.svc.events.mu.Lock()
	h.svc.events.sinks = append(h.svc.events.sinks, func(ev *sandboxdv1.Event, _ *eventDetail) {
		if ev.GetState().GetTo() == sandboxdv1.State_STARTING {
			h.svc.auditHealth.mu.Lock()
			ids <- ev.GetSessionId()
		}
	})
	h.svc.events.mu.Unlock()
	s := make(chan *clientSession, 1)
	go func() { s <- h.open(detached(cmd("/bin/sleep", "60"))).finish() }()
	id := within(h.t, ids, "the session's start record")
	_, err := h.client.Kill(ctxT(h.t), &sandboxdv1.KillRequest{Id: id})
	h.svc.auditHealth.err = health
	h.svc.auditHealth.mu.Unlock()
	if err != nil {
		h.t.Fatalf("Kill of a starting session: %v", err)
	}
	return id, s
}

// A session whose start record the audit log does not have is refused; one
// killed before that refusal ends KILLED, and its client gets that Exit
// rather than a stream that ends with neither an Exit nor an error.
func TestKillBeforeAnAuditRefusalAnswersTheClient(t *testing.T) {
	h := startDaemon(t, func(c *Config) { c.StateDir = t.TempDir() })
	id, s := h.killAtStartRecord(errors.New("the test's audit log is full"))
	wantExit(t, within(t, s, "the answer to the start"), sandboxdv1.State_KILLED, 0, 9, reasonOperator)
	if info := h.inspect(id); info.GetState() != sandboxdv1.State_KILLED {
		t.Errorf("session killed before its audit refusal: %v %q", info.GetState(), info.GetReason())
	}
}

// A kill that comes before the launch reaches the backend (here while the
// start record is checked; likewise while its layers are made) ends the
// launch there: the backend builds no sandbox for a session killed
// already, and the client gets the KILLED Exit.
func TestKillBeforeTheBackendStartsNoSandbox(t *testing.T) {
	h := startDaemon(t, func(c *Config) { c.StateDir = t.TempDir() })
	id, s := h.killAtStartRecord(nil)
	wantExit(t, within(t, s, "the answer to the start"), sandboxdv1.State_KILLED, 0, 9, reasonOperator)
	for _, spec := range h.backend.allSpecs() {
		if spec.SessionID == id {
			t.Fatal("the backend was asked to start a session killed before its launch")
		}
	}
}

// Once its launch is over, a session's record keeps nothing that ends the
// launch: that holds the starting stream's context, and through it the
// connection's transport and buffers, for as long as the record is kept.
func TestARunningSessionKeepsNoLaunchCancel(t *testing.T) {
	h := startDaemon(t)
	c := h.open(detached(cmd("/bin/sleep", "60")))
	c.waitStarted()
	h.svc.mu.Lock()
	sess := h.svc.sessions[c.started.GetSessionId()]
	h.svc.mu.Unlock()
	if sess == nil {
		t.Fatalf("no session %q", c.started.GetSessionId())
	}
	sess.mu.Lock()
	kept := sess.abortLaunch != nil
	sess.mu.Unlock()
	if kept {
		t.Error("a running session keeps its launch's cancel, and with it the starting stream's context")
	}
}

// A kill the daemon carries out as a launch ends (the session was killed
// while it started) holds up no other request while the backend's kill
// takes its time: List answers and another session runs meanwhile.
func TestASlowKillHoldsUpNoOtherRequest(t *testing.T) {
	h := startDaemon(t)
	killing := make(chan struct{}, 1)
	unblock := make(chan struct{})
	unblockKills := sync.OnceFunc(func() { close(unblock) })
	t.Cleanup(unblockKills)
	h.backend.mu.Lock()
	h.backend.killGate = func() {
		select {
		case killing <- struct{}{}:
		default:
		}
		<-unblock
	}
	h.backend.mu.Unlock()
	started, release := h.holdStarts(func(spec launcher.Spec) bool { return spec.Argv[0] == "/bin/sleep" })
	s := make(chan *clientSession, 1)
	go func() { s <- h.open(detached(cmd("/bin/sleep", "60"))).finish() }()
	spec := within(t, started, "launch")
	if _, err := h.client.Kill(ctxT(t), &sandboxdv1.KillRequest{Id: spec.SessionID}); err != nil {
		t.Fatalf("Kill of a starting session: %v", err)
	}
	release()
	within(t, killing, "the kill once the launch is over")
	listed := make(chan error, 1)
	go func() {
		_, err := h.client.List(ctxT(t), &sandboxdv1.ListRequest{})
		listed <- err
	}()
	if err := within(t, listed, "List while a kill is slow"); err != nil {
		t.Fatalf("List: %v", err)
	}
	other := make(chan *clientSession, 1)
	go func() { other <- h.open(cmd("/bin/true")).finish() }()
	wantExit(t, within(t, other, "a launch while a kill is slow"), sandboxdv1.State_EXITED, 0, 0, "")
	unblockKills()
	if info := h.waitState(spec.SessionID, sandboxdv1.State_KILLED); info.GetReason() != reasonOperator {
		t.Fatalf("killed while starting: ended %q, want %q", info.GetReason(), reasonOperator)
	}
	if r := within(t, s, "the killed session's Started"); r.err != nil {
		t.Fatalf("start: %v", r.err)
	}
}

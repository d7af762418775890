package daemon

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/internal/inputwait"
	"github.com/sandboxd/sandboxd/internal/share"
	"github.com/sandboxd/sandboxd/internal/signum"
	"github.com/sandboxd/sandboxd/internal/transport"
	"github.com/sandboxd/sandboxd/internal/vterm"
	"github.com/sandboxd/sandboxd/launcher"
	"github.com/sandboxd/sandboxd/netproxy"
	"github.com/sandboxd/sandboxd/policy"
)

// Why the daemon ended a session, as reported in Exit and SessionInfo.
const (
	reasonTimeout      = "timeout"
	reasonOperator     = "operator"
	reasonDisconnected = "client disconnected"
	reasonShutdown     = "daemon shutdown"
	reasonParentEnded  = "parent"
	// reasonLimit is followed by the limit's field, e.g.
	// "limit: limits.memory_bytes".
	reasonLimit = "limit"
)

// recentDenials is how many of a session's denials Inspect shows.
const recentDenials = 32

// session is the registry's record of one session. Fields above mu never
// change after creation.
type session struct {
	id       string
	ownerUID uint32
	// ownerSID is the owner's user SID on Windows, empty on unix.
	ownerSID string
	// parentID is the session on whose socket this one was started.
	parentID string
	// tree is the id of the root of the session's tree: its own, or its
	// parent's tree.
	tree string
	// sandboxUID and sandboxGID are the host identity the sandbox runs as;
	// children run as their parent does.
	sandboxUID, sandboxGID uint32
	argv                   []string
	cwd                    string
	tty                    bool
	detached               bool
	policy                 *sandboxdv1.Policy
	digest                 string
	created                time.Time
	// deadline is when limits.timeout ends the session, counted from its
	// creation, zero for never: known before the launch, so that a child
	// asked for before the launch is over gets no more.
	deadline time.Time
	// abortLaunch ends the launch while the session is STARTING: a kill
	// then (an operator's, its parent's end, its timeout, shutdown) does
	// not wait for a launch that may hang (an init blocked in its setup).
	// Nil in-process tests that launch nothing.
	abortLaunch context.CancelCauseFunc
	// out fans the output out to viewers and keeps the scrollback.
	out *broadcast
	// socket is the session's own socket when its policy allows children.
	socket *transport.SessionSocket
	// proxy is the session's way out under network ALLOWLIST, nil otherwise.
	proxy *netproxy.Server
	// outCap keeps limits.output_bytes; nil keeps everything.
	outCap *outputCap
	// watch is the input-state polling while it runs (see watchInput),
	// which output and input bring to its fastest rate.
	watch atomic.Pointer[inputWatch]
	// probe is the input-state poller's, while it runs: Inspect asks it
	// for the evidence.
	probe atomic.Pointer[inputwait.Probe]
	// screen follows a terminal session's output (see startScreen).
	screen atomic.Pointer[vterm.Screen]

	// quota is the quota key of the caller that started the session (for
	// a child: the connection on its parent's socket), which the session
	// counts against while it lives, as it does against its owner's
	// (ownerKey) when that is another. The caller itself is only announced:
	// the record does not keep it (80 bytes and its groups).
	quota string
	// events records the session's transitions and denials.
	events *eventBus
	// callerGroups are the groups of the caller that started the session
	// tree when it is not root (launcher.Spec.CallerGroups).
	callerGroups []uint32
	// layerFrom is the ended session whose layers this one starts on
	// (Start.layer_from).
	layerFrom string

	// closed is set, under the Service's mu, once the session has ended
	// and its subtree is being killed; no child may be added after.
	closed bool

	mu         sync.Mutex
	state      sandboxdv1.State
	proc       launcher.Process // set while RUNNING and until waited
	waited     bool             // proc.Wait returned; proc must not be signalled
	killReason string           // why the daemon killed proc, first reason wins
	// launched is closed when the session leaves STARTING, or is killed
	// before. It is made only when a child is asked for on the session's
	// socket before then (the socket is served from the start, and the
	// command runs before the daemon hears that it does), so that the
	// child waits for the parent's mechanism set rather than be planned
	// without it.
	launched    chan struct{}
	enforcement *sandboxdv1.EnforcementReport
	pid         int
	exitCode    int32
	exitSignal  int32
	reason      string
	ended       time.Time
	input       *stdio // set while RUNNING: where stdin and resizes go
	interactive bool   // a client holds the input
	// lastSeq is the sequence number of the session's latest event.
	lastSeq uint64
	// denials are the most recent ones, oldest first; denialCount all.
	denials     []*sandboxdv1.Denial
	denialCount uint64
}

// policies holds each normalized policy that some session still runs
// under, with its digest, so that sessions started under the same policy
// share one (about 0.6 KiB of heap for the workspace-write preset's) and
// its digest is computed once rather than at every launch. Nothing
// changes a session's policy.
var policies share.Table[sandboxdv1.Policy]

// sharedPolicy returns the policy equal to pol that a session holds
// already, or pol, which it keeps for the next, with its policy.Digest.
func sharedPolicy(pol *sandboxdv1.Policy) (*sandboxdv1.Policy, string) {
	return share.Message(&policies, pol, policy.Digest)
}

func (s *session) info() *sandboxdv1.SessionInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := &sandboxdv1.SessionInfo{
		Id:            s.id,
		State:         s.state,
		Argv:          s.argv,
		Cwd:           s.cwd,
		Tty:           s.tty,
		Policy:        s.policy,
		PolicyDigest:  s.digest,
		Enforcement:   s.enforcement,
		ExitCode:      s.exitCode,
		Signal:        s.exitSignal,
		Reason:        s.reason,
		Pid:           int32(s.pid),
		Created:       timestamppb.New(s.created),
		OwnerUid:      s.ownerUID,
		ParentId:      s.parentID,
		Detached:      s.detached,
		Viewers:       uint32(s.out.count()),
		RecentDenials: slices.Clone(s.denials),
		DenialCount:   s.denialCount,
	}
	if !s.ended.IsZero() {
		in.Ended = timestamppb.New(s.ended)
	}
	return in
}

// owner names the session's owner in log lines.
func (s *session) owner() string {
	if s.ownerSID != "" {
		return s.ownerSID
	}
	return "uid " + strconv.FormatUint(uint64(s.ownerUID), 10)
}

// moveLocked changes the state after checking the transition and records
// the change as an event; s.mu is held. The caller has set the fields the
// event reports (reason, exit code, signal) before.
func (s *session) moveLocked(to sandboxdv1.State, d *eventDetail) error {
	if err := checkTransition(s.state, to); err != nil {
		return fmt.Errorf("session %s: %w", s.id, err)
	}
	from := s.state
	s.state = to
	if from == sandboxdv1.State_STARTING {
		if s.launched != nil {
			close(s.launched)
			s.launched = nil
		}
		// It holds the starting stream's context, and through it the
		// connection's transport and buffers, for as long as the record
		// is kept.
		s.abortLaunch = nil
	}
	if terminal(to) {
		s.ended = time.Now()
	}
	ch := &sandboxdv1.StateChange{From: from, To: to}
	if terminal(to) {
		ch.Reason, ch.ExitCode, ch.Signal = s.reason, s.exitCode, s.exitSignal
	}
	ev := &sandboxdv1.Event{Kind: &sandboxdv1.Event_State{State: ch}}
	if to == sandboxdv1.State_RUNNING && from == sandboxdv1.State_STARTING {
		ev.Argv = s.argv
	}
	s.publishLocked(ev, d)
	return nil
}

// publishLocked records an event of the session; s.mu is held, so the
// session's events are numbered in the order they happened.
func (s *session) publishLocked(ev *sandboxdv1.Event, d *eventDetail) {
	if s.events == nil {
		return
	}
	ev.SessionId, ev.ParentId = s.id, s.parentID
	s.lastSeq = s.events.publish(ev, d)
}

// announce records that the session exists, started by caller, before it
// is launched.
func (s *session) announce(caller *Caller) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.publishLocked(&sandboxdv1.Event{
		Kind: &sandboxdv1.Event_State{State: &sandboxdv1.StateChange{To: s.state}},
		Argv: s.argv,
	}, &eventDetail{caller: caller, policy: s.policy, digest: s.digest, cwd: s.cwd, tty: s.tty})
}

// snapshot is what a watch starts with for this session: its state, then
// the denials it still holds (the latest recentDenials), all marked as
// snapshot; and the sequence number of the latest event they reflect.
func (s *session) snapshot() ([]*sandboxdv1.Event, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []*sandboxdv1.Event{{
		Time:      timestamppb.Now(),
		SessionId: s.id,
		ParentId:  s.parentID,
		Kind:      &sandboxdv1.Event_State{State: &sandboxdv1.StateChange{To: s.state, Reason: s.reason, ExitCode: s.exitCode, Signal: s.exitSignal}},
		Snapshot:  true,
		Argv:      s.argv,
	}}
	for _, d := range s.denials {
		out = append(out, &sandboxdv1.Event{Time: d.GetTime(), SessionId: s.id, ParentId: s.parentID, Kind: &sandboxdv1.Event_Denial{Denial: d}, Snapshot: true})
	}
	return out, s.lastSeq
}

// running moves the launched session to RUNNING and returns the reason of
// a kill asked for while it was STARTING, which the caller carries out.
func (s *session) running(p launcher.Process, enforcement *sandboxdv1.EnforcementReport, input *stdio) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.proc = p
	s.pid = p.Pid()
	s.enforcement = enforcement
	s.input = input
	return s.killReason, s.moveLocked(sandboxdv1.State_RUNNING, &eventDetail{enforcement: enforcement, launchLatency: time.Since(s.created)})
}

// setActivity moves a live session between RUNNING and the waiting states
// as its processes block and go on (see watchInput), and says whether the
// state changed. A session that has ended, or whose process has been
// reaped, stays as it is.
func (s *session) setActivity(to sandboxdv1.State) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !live(s.state) || s.waited {
		return false, nil
	}
	if s.state == to {
		return false, nil
	}
	return true, s.moveLocked(to, nil)
}

// active notes output or input, after which the input state is checked
// again soon.
func (s *session) active() {
	if w := s.watch.Load(); w != nil {
		w.poke()
	}
}

func (s *session) pidOf() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pid
}

// denied records one operation the sandbox refused.
func (s *session) denied(d *sandboxdv1.Denial) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.denialCount++
	if len(s.denials) == recentDenials {
		s.denials = slices.Delete(s.denials, 0, 1)
	}
	s.denials = append(s.denials, d)
	s.publishLocked(&sandboxdv1.Event{Time: d.GetTime(), Kind: &sandboxdv1.Event_Denial{Denial: d}}, &eventDetail{tree: s.tree, owner: s.ownerKey()})
}

// claimInput makes the caller the session's one interactive client.
func (s *session) claimInput() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.interactive {
		return fmt.Errorf("session %s already has an interactive client (attach read-only instead): %w", s.id, ErrBusy)
	}
	s.interactive = true
	return nil
}

func (s *session) releaseInput() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.interactive = false
}

// stdin returns where input goes, or ErrNotRunning once the process has
// been reaped.
func (s *session) stdin() (*stdio, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.input == nil || s.waited {
		return nil, fmt.Errorf("session %s: %w", s.id, ErrNotRunning)
	}
	return s.input, nil
}

func (s *session) failedToStart(exitCode int, reason, refusedField string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := checkTransition(s.state, sandboxdv1.State_FAILED_TO_START); err != nil {
		return fmt.Errorf("session %s: %w", s.id, err)
	}
	s.exitCode = int32(exitCode)
	s.reason = reason
	return s.moveLocked(sandboxdv1.State_FAILED_TO_START, &eventDetail{refusedField: refusedField})
}

// markWaited records that the process has been reaped, so no later kill or
// signal can hit a reused pid.
func (s *session) markWaited() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waited = true
}

// waitLaunched waits until the session has left STARTING or is killed,
// or ctx is done, and fails with ErrNotRunning unless the session then
// runs and is not being killed: a child of a parent that failed to
// start, or is to end, has no sandbox to be narrower than.
func (s *session) waitLaunched(ctx context.Context) error {
	s.mu.Lock()
	// A kill ends the wait: the launch it abandons may be stuck in a step
	// that only notices once it returns.
	if s.state == sandboxdv1.State_STARTING && s.killReason == "" {
		if s.launched == nil {
			s.launched = make(chan struct{})
		}
		ch := s.launched
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		s.mu.Lock()
	}
	defer s.mu.Unlock()
	if !live(s.state) || s.killReason != "" {
		return fmt.Errorf("session %s: %w", s.id, ErrNotRunning)
	}
	return nil
}

// enforcementReport is what Started shows an attaching client.
func (s *session) enforcementReport() *sandboxdv1.EnforcementReport {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.enforcement
}

// finish moves the session to its end state from how the process ended and
// returns the Exit message for the client.
func (s *session) finish(st launcher.Status, waitErr error) (*sandboxdv1.Exit, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	to := sandboxdv1.State_EXITED
	if st.Limit != "" && s.killReason == "" {
		s.killReason = reasonLimit + ": " + st.Limit
	}
	if s.killReason != "" {
		to = sandboxdv1.State_KILLED
	}
	if err := checkTransition(s.state, to); err != nil {
		return nil, fmt.Errorf("session %s: %w", s.id, err)
	}
	s.reason = s.killReason
	s.exitCode = int32(st.ExitCode)
	s.exitSignal = signum.ToWire(st.Signal)
	if waitErr != nil {
		// The outcome is unknown; report the daemon's failure code rather
		// than a success the command may not have had.
		s.exitCode, s.exitSignal = 125, 0
		s.reason = fmt.Sprintf("wait for sandbox: %v", waitErr)
	}
	if err := s.moveLocked(to, nil); err != nil {
		return nil, err
	}
	s.proc = nil
	return &sandboxdv1.Exit{State: s.state, ExitCode: s.exitCode, Signal: s.exitSignal, Reason: s.reason}, nil
}

// kill ends every process of the sandbox and records why, so the session
// ends KILLED with that reason. A session still STARTING has no sandbox to
// kill yet: the reason is recorded and its launch is abandoned, which kills
// what it had made; a launch that completes all the same kills the sandbox
// once there is one (Service.launch).
func (s *session) kill(reason string) error {
	s.mu.Lock()
	if s.state == sandboxdv1.State_STARTING {
		if s.killReason == "" {
			s.killReason = reason
		}
		if s.launched != nil {
			close(s.launched)
			s.launched = nil
		}
		abort := s.abortLaunch
		s.mu.Unlock()
		if abort != nil {
			abort(fmt.Errorf("session %s killed while starting (%s): %w", s.id, reason, ErrNotRunning))
		}
		return nil
	}
	if !live(s.state) || s.waited {
		s.mu.Unlock()
		return fmt.Errorf("kill session %s: %w", s.id, ErrNotRunning)
	}
	if s.killReason == "" {
		s.killReason = reason
	}
	p := s.proc
	s.mu.Unlock()
	if err := p.Kill(); err != nil {
		return fmt.Errorf("kill session %s: %w", s.id, err)
	}
	return nil
}

func (s *session) signal(sig syscall.Signal) error {
	s.mu.Lock()
	if !live(s.state) || s.waited {
		s.mu.Unlock()
		return fmt.Errorf("signal session %s: %w", s.id, ErrNotRunning)
	}
	p := s.proc
	s.mu.Unlock()
	if err := p.Signal(sig); err != nil {
		return fmt.Errorf("signal %d to session %s: %w", int(sig), s.id, err)
	}
	return nil
}

// startFailure turns an error from Backend.Start into the session's end
// state and says whether the client gets an Exit (the command could not be
// executed: exit 126/127 like a shell) or an error status.
func (s *session) startFailure(err error) (*sandboxdv1.Exit, error) {
	if exit := s.killedStarting(); exit != nil {
		return exit, nil
	}
	var ee *launcher.ExecError
	if errors.As(err, &ee) {
		if ferr := s.failedToStart(ee.ExitCode(), ee.Error(), ""); ferr != nil {
			return nil, ferr
		}
		return &sandboxdv1.Exit{State: sandboxdv1.State_FAILED_TO_START, ExitCode: int32(ee.ExitCode()), Reason: ee.Error()}, nil
	}
	var field string
	var u *launcher.Unenforceable
	if errors.As(err, &u) {
		field = u.Field
	}
	if ferr := s.failedToStart(0, err.Error(), field); ferr != nil {
		return nil, errors.Join(err, ferr)
	}
	// Not "start session": the client names its call, and the error
	// would say it twice.
	return nil, fmt.Errorf("session %s: %w", s.id, err)
}

// killedStarting ends a session killed while it was STARTING, whose launch
// has failed (abandoned for the kill, or failed first), as KILLED with the
// kill's reason, and returns its Exit; nil when it was not killed. Its
// processes, if any, were ended by SIGKILL, which the Exit reports as a
// kill of a running session's does.
func (s *session) killedStarting() *sandboxdv1.Exit {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.killReason == "" || s.state != sandboxdv1.State_STARTING {
		return nil
	}
	s.reason = s.killReason
	s.exitSignal = signum.ToWire(syscall.SIGKILL)
	if err := s.moveLocked(sandboxdv1.State_KILLED, nil); err != nil {
		return nil
	}
	return &sandboxdv1.Exit{State: s.state, Signal: s.exitSignal, Reason: s.reason}
}

//go:build linux

package main

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/sandboxd/sandboxd/api/client"
	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/api/sandboxd/v1/sandboxdv1grpc"
	sdaemon "github.com/sandboxd/sandboxd/daemon"
)

// idleArgv is what every idle session and idle bwrap sandbox runs. Together
// with the workspace as cwd it is also how leftovers of this run are told
// from other sessions on the same daemon.
var idleArgv = []string{"sleep", "3600"}

// idleTerminalArgv is an idle terminal session: a prompt, as a shell
// prints, and then nothing. The prompt is what the daemon's screen of the
// session keeps (a record of the output: a prompt asks the terminal
// nothing, so no emulator runs).
var idleTerminalArgv = []string{"sh", "-c", "printf '$ '; exec sleep 3600"}

// terminalSessions is how many idle terminal sessions the memory figure
// starts at most: they are there to show what a terminal adds to a
// session, which was half a MiB of the daemon's while its screen ran an
// emulator from the first output (see the figure's note).
const terminalSessions = 100

func live(s sandboxdv1.State) bool {
	switch s {
	case sandboxdv1.State_STARTING, sandboxdv1.State_RUNNING, sandboxdv1.State_WAITING_FOR_INPUT,
		sandboxdv1.State_WAITING, sandboxdv1.State_WAITING_FOR_NETWORK:
		return true
	}
	return false
}

// list returns the daemon's sessions. The client's List is tried first; a
// refusal for size (thousands of sessions outgrow gRPC's default 4 MiB
// message) is noted for the report and answered over a connection of our
// own that takes larger messages.
func (b *bench) list(ctx context.Context) ([]*sandboxdv1.SessionInfo, error) {
	b.bigListMu.Lock()
	big := b.bigList
	b.bigListMu.Unlock()
	if big == nil {
		infos, err := b.cl.List(ctx)
		if status.Code(err) != codes.ResourceExhausted {
			return infos, err
		}
		if big, err = b.openBigList(err); err != nil {
			return nil, err
		}
	}
	resp, err := sandboxdv1grpc.NewSandboxdClient(big).List(ctx, &sandboxdv1.ListRequest{}, grpc.MaxCallRecvMsgSize(1<<30))
	if err != nil {
		return nil, fmt.Errorf("list sessions (large-message connection): %w", err)
	}
	return resp.GetSessions(), nil
}

func (b *bench) openBigList(cause error) (*grpc.ClientConn, error) {
	b.bigListMu.Lock()
	defer b.bigListMu.Unlock()
	if b.bigList != nil {
		return b.bigList, nil
	}
	socket := b.socket
	conn, err := grpc.NewClient("passthrough:///sandboxd",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		}))
	if err != nil {
		return nil, fmt.Errorf("large-message connection to %s: %w", socket, err)
	}
	b.bigList = conn
	b.listTooBig = cause.Error()
	return conn, nil
}

func (b *bench) closeBigList() {
	b.bigListMu.Lock()
	defer b.bigListMu.Unlock()
	if b.bigList != nil {
		b.bigList.Close()
	}
}

// ours says whether info is an idle session this tool starts.
func (b *bench) ours(info *sandboxdv1.SessionInfo) bool {
	return info.GetCwd() == b.cfg.workspace && (slices.Equal(info.GetArgv(), idleArgv) || slices.Equal(info.GetArgv(), idleTerminalArgv))
}

// liveOurs lists this run's live idle sessions.
func (b *bench) liveOurs(ctx context.Context) ([]*sandboxdv1.SessionInfo, error) {
	infos, err := b.list(ctx)
	if err != nil {
		return nil, err
	}
	var out []*sandboxdv1.SessionInfo
	for _, in := range infos {
		if live(in.GetState()) && b.ours(in) {
			out = append(out, in)
		}
	}
	return out, nil
}

// ramp is how far starting n of something got.
type ramp struct {
	asked, started int
	firstErr       error  // verbatim, the first failure
	stopped        string // the safety stop, if one fired
	elapsed        time.Duration
}

func (r ramp) String() string {
	s := fmt.Sprintf("%d of %d started in %v", r.started, r.asked, r.elapsed.Round(time.Millisecond))
	if r.stopped != "" {
		s += "; " + r.stopped
	}
	if r.firstErr != nil {
		s += fmt.Sprintf("; first error: %v", r.firstErr)
	}
	return s
}

// rampUp calls start n times from --clients workers until one fails, the
// guard stops it or ctx ends. Only the first failure is kept: the later ones
// are usually the same limit seen again.
func (b *bench) rampUp(what string, n int, start func() error) ramp {
	g := newGuard(b.cfg)
	r := ramp{asked: n}
	var next, started atomic.Int64
	var stop atomic.Bool
	var once sync.Once
	fail := func(err error, why string) {
		once.Do(func() { r.firstErr, r.stopped = err, why })
		stop.Store(true)
	}
	begin := time.Now()
	var wg sync.WaitGroup
	for range b.cfg.clients {
		wg.Go(func() {
			for !stop.Load() && b.ctx.Err() == nil {
				i := next.Add(1)
				if i > int64(n) {
					return
				}
				if why := g.check(); why != "" {
					fail(nil, why)
					return
				}
				if err := start(); err != nil {
					if b.ctx.Err() == nil {
						fail(err, "")
					}
					return
				}
				if s := started.Add(1); s%1000 == 0 {
					warnf("%s: %d started", what, s)
				}
			}
		})
	}
	wg.Wait()
	r.started = int(started.Load())
	r.elapsed = time.Since(begin)
	return r
}

// sessionSet is the ids of the detached sessions this run started: nothing
// but an explicit kill ends them.
type sessionSet struct {
	mu  sync.Mutex
	ids []string
}

func (s *sessionSet) add(id string) {
	s.mu.Lock()
	s.ids = append(s.ids, id)
	s.mu.Unlock()
}

func (s *sessionSet) all() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.ids)
}

// startIdle starts one detached idle session and records it.
func (b *bench) startIdle(set *sessionSet) func() error {
	return b.startIdleWith(set, false, idleArgv)
}

// startIdleWith starts one detached session of argv, on a terminal when
// tty is set, and records it.
func (b *bench) startIdleWith(set *sessionSet, tty bool, argv []string) func() error {
	start, err := b.startMsg(tty, true, argv...)
	return func() error {
		if err != nil {
			return err
		}
		res, err := b.cl.Run(b.ctx, client.RunOptions{Start: proto.Clone(start).(*sandboxdv1.Start)})
		if err != nil {
			return err
		}
		if res.SessionID != "" {
			set.add(res.SessionID)
		}
		if res.Exit != nil {
			return fmt.Errorf("session %s of %q ended at once: %s exit %d: %s", res.SessionID, argv,
				res.Exit.GetState(), client.ExitCode(res, nil), res.Exit.GetReason())
		}
		return nil
	}
}

// waitLive waits until want of this run's idle sessions are live, and
// returns how many are.
func (b *bench) waitLive(want int, timeout time.Duration) (int, error) {
	deadline := time.Now().Add(timeout)
	for {
		infos, err := b.liveOurs(b.ctx)
		if err != nil {
			return 0, err
		}
		if len(infos) >= want || time.Now().After(deadline) {
			return len(infos), nil
		}
		select {
		case <-b.ctx.Done():
			return len(infos), b.ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// killSessions kills every session of set, then whatever idle sessions of
// this run are still live (one whose Started never reached us, say), and
// waits until none is. It runs after an interrupt too, so it has its own
// context.
func (b *bench) killSessions(set *sessionSet) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(b.ctx), 3*time.Minute)
	defer cancel()
	kill := func(ids []string) {
		work := make(chan string)
		var wg sync.WaitGroup
		for range b.cfg.clients {
			wg.Go(func() {
				for id := range work {
					// An id that already ended is refused; the sweep
					// below is what decides whether all are gone.
					_ = b.cl.Kill(ctx, id, 0)
				}
			})
		}
		for _, id := range ids {
			work <- id
		}
		close(work)
		wg.Wait()
	}
	kill(set.all())
	for {
		left, err := b.liveOurs(ctx)
		if err != nil {
			return fmt.Errorf("listing sessions left to kill (sessions may be left in the daemon): %w", err)
		}
		if len(left) == 0 {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%d idle sessions still live after killing them for 3 minutes (first: %s)", len(left), left[0].GetId())
		}
		ids := make([]string, len(left))
		for i, in := range left {
			ids[i] = in.GetId()
		}
		time.Sleep(200 * time.Millisecond)
		kill(ids)
	}
}

// procSet is bwrap processes this run started and must kill and reap.
type procSet struct {
	mu    sync.Mutex
	procs []*exec.Cmd
}

func (p *procSet) add(c *exec.Cmd) {
	p.mu.Lock()
	p.procs = append(p.procs, c)
	p.mu.Unlock()
}

// killAll kills each bwrap (its sandbox dies with it: --die-with-parent)
// and reaps it, then ends the sandboxes that were orphaned all the same;
// marker is in the command line of each.
func (p *procSet) killAll(marker string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.procs {
		_ = c.Process.Kill()
	}
	for _, c := range p.procs {
		_ = c.Wait()
	}
	p.procs = nil
	if n := reapAdopted(marker); n > 0 {
		warnf("killed %d processes of bwrap sandboxes that outlived their bwrap", n)
	}
}

// startIdleBwrap starts one idle bwrap sandbox running argv in the
// background.
func (b *bench) startIdleBwrap(set *procSet, argv []string) func() error {
	return func() error {
		// Not CommandContext: the ramp is over before the measurement, and
		// killAll, deferred by the caller, ends these on every path.
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Dir = b.cfg.workspace
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("%s: %w", shellJoin(argv), err)
		}
		set.add(cmd)
		return nil
	}
}

// waitBwrapIdle waits until every bwrap of set has got as far as running
// sleep, and returns how many have.
func (b *bench) waitBwrapIdle(set *procSet, timeout time.Duration) (int, error) {
	set.mu.Lock()
	pids := make([]int, len(set.procs))
	for i, c := range set.procs {
		pids[i] = c.Process.Pid
	}
	set.mu.Unlock()
	deadline := time.Now().Add(timeout)
	ready := 0
	for _, pid := range pids {
		for !hasDescendantNamed(pid, idleArgv[0]) {
			if b.ctx.Err() != nil {
				return ready, b.ctx.Err()
			}
			if time.Now().After(deadline) {
				return ready, nil
			}
			time.Sleep(20 * time.Millisecond)
		}
		ready++
	}
	return ready, nil
}

// side is one side of the memory figure after its sandboxes were up.
type side struct {
	acct memAccount
	r    ramp
	// tasksOwn are the threads of the sandboxes' own processes;
	// tasksRest those of the rest of the daemon's tree before and after.
	tasksOwn, tasksRestBefore, tasksRestAfter int
	// residue is the counted kernel memory still above where it started
	// once the sandboxes had ended, in bytes.
	residue int64
	// footprint describes one sandbox's processes.
	footprint string
	// mountsBefore is the host's mount level before the sandboxes
	// started, mountsUp with them up (memacct.go: bwrap's PSS follows it).
	mountsBefore, mountsUp int
}

// measureSide starts n idle sandboxes of one side, waits for up to say
// they all run, and accounts for what they cost (memacct.go). procs
// returns the pids of the sandboxes' own processes and of the rest of
// what their side runs (the daemon's tree), and one sandbox's root pid;
// stop ends the sandboxes.
func (b *bench) measureSide(what string, n int, start func() error, up func(int) (int, error), procs func() (own, rest []int, one int), stop func()) (side, error) {
	var sd side
	stopped := false
	defer func() {
		if !stopped {
			stop()
		}
	}()
	if _, err := settledMemAvailable(b.ctx); err != nil {
		return sd, fmt.Errorf("settle before: %w", err)
	}
	var err error
	if sd.mountsBefore, err = settledMounts(b.ctx); err != nil {
		return sd, fmt.Errorf("settle before: %w", err)
	}
	ownBefore, restBefore, _ := procs()
	pssOwnBefore, tasksOwnBefore := pssOf(ownBefore)
	pssRestBefore, tasksRestBefore := pssOf(restBefore)
	before, err := sampleMemory()
	if err != nil {
		return sd, fmt.Errorf("memory before: %w", err)
	}
	sd.r = b.rampUp(what, n, start)
	if err := b.ctx.Err(); err != nil {
		return sd, err
	}
	if sd.r.started == 0 {
		return sd, fmt.Errorf("%s: none started: %s", what, sd.r)
	}
	ready, err := up(sd.r.started)
	if err != nil {
		return sd, err
	}
	if ready < sd.r.started {
		return sd, fmt.Errorf("%s: only %d of %d started are up after waiting", what, ready, sd.r.started)
	}
	// Page tables, slab and the daemon's buffers settle after the last
	// start; 2 s is well past what the first settle loop ever saw move.
	time.Sleep(2 * time.Second)
	if _, err := settledMemAvailable(b.ctx); err != nil {
		return sd, fmt.Errorf("settle after: %w", err)
	}
	own, rest, one := procs()
	if sd.mountsUp, err = hostMounts(); err != nil {
		return sd, fmt.Errorf("mounts with the sandboxes up: %w", err)
	}
	pssOwn, tasksOwn := pssOf(own)
	pssRest, tasksRest := pssOf(rest)
	after, err := sampleMemory()
	if err != nil {
		return sd, fmt.Errorf("memory after: %w", err)
	}
	sd.acct = account(sd.r.started, before, after, pssOwn-pssOwnBefore, pssRest-pssRestBefore)
	sd.tasksOwn = tasksOwn - tasksOwnBefore
	sd.tasksRestBefore, sd.tasksRestAfter = tasksRestBefore, tasksRest
	sd.footprint = "unknown (no pid to look at)"
	if one > 0 {
		// One sandbox's PSS need not be the average: a process's share of
		// the pages it shares depends on who else maps them.
		sd.footprint = fmt.Sprintf("%s (the first started; over all %d, the PSS of their processes averages %.2f MiB)",
			footprintOf(one), sd.r.started, sd.acct.per(sd.acct.pssOwn)/mib)
	}
	stopped = true
	stop()
	// What is still counted once they are gone is slab the caches keep,
	// and whatever else the host did meanwhile: the error bar of the
	// kernel's part.
	if _, err := settledMemAvailable(b.ctx); err == nil {
		if end, err := sampleMemory(); err == nil {
			sd.residue = account(sd.r.started, before, end, 0, 0).kernelBytes()
		}
	}
	return sd, nil
}

func (b *bench) memory() error {
	n := b.cfg.sessions
	daemon, err := daemonPID(b.socket)
	if err != nil {
		return fmt.Errorf("the daemon's pid: %w", err)
	}
	var sessions sessionSet
	sdProcs := func() (own, rest []int, one int) { return b.sessionProcs(daemon) }
	sd, err := b.measureSide("memory, sandboxd sessions", n, b.startIdle(&sessions),
		func(want int) (int, error) { return b.waitLive(want, time.Minute) }, sdProcs,
		func() {
			if err := b.killSessions(&sessions); err != nil {
				warnf("memory: %v", err)
			}
		})
	if err != nil {
		return err
	}

	bw, err := b.measureBwrap("memory, bwrap sandboxes", n, b.bwrapArgv(idleArgv...))
	if err != nil {
		return err
	}
	// The same sandboxes in the host's network namespace: what a network
	// namespace of their own costs, which sandboxd's sessions under
	// network NONE pay as well.
	shareNet := withShareNet(b.bwrapArgv(idleArgv...))
	bwNet, err := b.measureBwrap("memory, bwrap --share-net sandboxes", n, shareNet)
	if err != nil {
		return err
	}
	var terminals sessionSet
	nTerm := min(n, terminalSessions)
	term, err := b.measureSide("memory, sandboxd terminal sessions", nTerm, b.startIdleWith(&terminals, true, idleTerminalArgv),
		func(want int) (int, error) { return b.waitLive(want, time.Minute) }, sdProcs,
		func() {
			if err := b.killSessions(&terminals); err != nil {
				warnf("memory: %v", err)
			}
		})
	if err != nil {
		return err
	}
	sdMiB, bwMiB := sd.acct.perSession(), bw.acct.perSession()
	b.add(row{
		figure:      fmt.Sprintf("memory per idle session, accounted (n=%d)", sd.r.started),
		value:       fmt.Sprintf("%.3f MiB", sdMiB),
		counterpart: fmt.Sprintf("bwrap %.3f MiB", bwMiB),
		ratio:       ratio(sdMiB, bwMiB),
		target:      fmt.Sprintf("<= 0.50x bwrap at %d", n),
		verdict:     verdict(sdMiB <= 0.5*bwMiB && sd.r.started >= n),
	})
	b.add(row{
		figure:      fmt.Sprintf("  cross-check: MemAvailable drop (n=%d)", sd.r.started),
		value:       fmt.Sprintf("%.3f MiB", sd.acct.availPerSession()),
		counterpart: fmt.Sprintf("bwrap %.3f MiB", bw.acct.availPerSession()),
		ratio:       ratio(sd.acct.availPerSession(), bw.acct.availPerSession()),
	})
	b.add(row{
		figure: fmt.Sprintf("  idle terminal session, accounted (n=%d)", term.r.started),
		value:  fmt.Sprintf("%.3f MiB", term.acct.perSession()),
	})
	sdTasks, bwTasks := sd.acct.per(int64(sd.tasksOwn)), bw.acct.per(int64(bw.tasksOwn))
	b.add(row{
		figure:      fmt.Sprintf("tasks per idle session (n=%d)", sd.r.started),
		value:       fmt.Sprintf("%.2f", sdTasks),
		counterpart: fmt.Sprintf("bwrap %.2f", bwTasks),
		ratio:       ratio(sdTasks, bwTasks),
		target:      "<= 2",
		verdict:     verdict(sdTasks <= 2 && sd.r.started >= n),
	})
	if sd.r.started < n || sd.r.firstErr != nil {
		b.note("memory: sandboxd ramp stopped early: %s", sd.r)
	}
	if bw.r.started < n || bw.r.firstErr != nil {
		b.note("memory: bwrap ramp stopped early: %s", bw.r)
	}
	for _, s := range []struct {
		name string
		sd   side
	}{{"sandboxd", sd}, {"bwrap", bw}} {
		a := s.sd.acct
		b.note("memory, %s: %s; MemAvailable fell %.1f KiB per sandbox; after they ended, counted kernel memory stayed %.1f KiB per sandbox above the start (slab the caches keep, and other load: the error bar of the kernel part)",
			s.name, a.breakdown(), a.per(a.availDrop)/1024, a.per(s.sd.residue)/1024)
		b.note("memory, %s: slab caches, KiB per sandbox: %s", s.name, a.topDeltas(a.slabs, 14))
		b.note("memory, %s: vmalloc without stacks, KiB per sandbox by caller: %s", s.name, a.topDeltas(a.vmalloc, 5))
	}
	netK := bw.acct.per(bw.acct.kernelBytes()-bwNet.acct.kernelBytes()) / 1024
	b.note("memory: a network namespace of its own costs a bwrap sandbox %.1f KiB of counted kernel memory (%.1f KiB per sandbox with --share-net, SUnreclaim %.1f KiB less): %s",
		netK, bwNet.acct.per(bwNet.acct.kernelBytes())/1024, bw.acct.per(bw.acct.kernel["SUnreclaim"]-bwNet.acct.kernel["SUnreclaim"])/1024, bwNet.acct.breakdown())
	b.note("memory: one idle sandboxd session is %s; the sessions' own processes have %.2f tasks per session; the rest of the daemon's tree (daemon threads, spawner, inits started ahead) had %d tasks before and %d after (%+.3f per session)",
		sd.footprint, sdTasks, sd.tasksRestBefore, sd.tasksRestAfter, sd.acct.per(int64(sd.tasksRestAfter-sd.tasksRestBefore)))
	b.note("memory: one idle bwrap sandbox is %s", bw.footprint)
	b.note("memory: mounts alive on the host (every mount namespace) before the sandboxes started, then with them up: sandboxd %d, then %d; bwrap %d, then %d; bwrap --share-net %d, then %d. Each bwrap's PSS grows with the mounts alive when it starts (it indexes mountinfo by mount id, and ids are reused lowest first), so mounts that other load holds raise the counterpart (20,000 held elsewhere added 131 KiB to each bwrap sandbox); the sessions' processes do not read mountinfo",
		sd.mountsBefore, sd.mountsUp, bw.mountsBefore, bw.mountsUp, bwNet.mountsBefore, bwNet.mountsUp)
	if more := bw.mountsBefore - sd.mountsBefore; more > n {
		b.note("memory: WARNING: %d more mounts were alive when the bwrap sandboxes started than when the sessions did: other load inflated the counterpart; run again on a quieter host", more)
	}
	b.note("memory, sandboxd terminal sessions (%q with a terminal; the daemon's screen of the session records the prompt): %s",
		idleTerminalArgv, term.acct.breakdown())
	b.reproduce(fmt.Sprintf("memory and tasks (%d idle sandboxes, each side in turn: PSS of their processes and of the daemon's tree, deltas of /proc/meminfo, /proc/slabinfo and /proc/vmallocinfo, MemAvailable as a cross-check; threads of the sessions' processes, of each bwrap's):", n),
		b.benchtoolLine("memory", "--sessions", fmt.Sprint(n), "--clients", fmt.Sprint(b.cfg.clients)),
		fmt.Sprintf("cd %s && for i in $(seq %d); do %s & done   # then compare /proc/meminfo and /proc/slabinfo, and kill them; again with --share-net",
			shellQuote(b.cfg.workspace), n, shellJoin(b.bwrapArgv(idleArgv...))))
	return nil
}

// measureBwrap is measureSide for n idle bwrap sandboxes running argv.
func (b *bench) measureBwrap(what string, n int, argv []string) (side, error) {
	var bwraps procSet
	procs := func() (own, rest []int, one int) {
		bwraps.mu.Lock()
		defer bwraps.mu.Unlock()
		for _, c := range bwraps.procs {
			if one == 0 {
				one = c.Process.Pid
			}
			own = append(own, tree(c.Process.Pid)...)
		}
		return own, nil, one
	}
	return b.measureSide(what, n, b.startIdleBwrap(&bwraps, argv),
		func(int) (int, error) { return b.waitBwrapIdle(&bwraps, time.Minute) }, procs,
		func() { bwraps.killAll(b.cfg.workspace) })
}

// withShareNet is a bwrap command line that keeps the host's network
// namespace where --unshare-all would make one.
func withShareNet(argv []string) []string {
	i := slices.Index(argv, "--unshare-all")
	return slices.Concat(argv[:i+1], []string{"--share-net"}, argv[i+1:])
}

// sessionProcs returns the pids of this run's live idle sessions'
// processes and of the rest of the daemon's tree (the daemon, its spawner,
// the inits it keeps started ahead, other sessions), and the root pid of
// one of the sessions.
func (b *bench) sessionProcs(daemon int) (own, rest []int, one int) {
	infos, err := b.liveOurs(b.ctx)
	if err != nil {
		warnf("listing sessions: %v", err)
	}
	mine := map[int]bool{}
	for _, in := range infos {
		if in.GetPid() <= 0 {
			continue
		}
		if one == 0 {
			one = int(in.GetPid())
		}
		for _, p := range tree(int(in.GetPid())) {
			mine[p] = true
			own = append(own, p)
		}
	}
	for _, p := range tree(daemon) {
		if !mine[p] {
			rest = append(rest, p)
		}
	}
	return own, rest, one
}

// sessionFootprint describes the process tree of one live idle session.
func (b *bench) sessionFootprint() string {
	infos, err := b.liveOurs(b.ctx)
	if err != nil || len(infos) == 0 || infos[0].GetPid() <= 0 {
		return "unknown (no pid to look at)"
	}
	return footprintOf(int(infos[0].GetPid()))
}

func footprintOf(pid int) string {
	procs, threads, rss, pss, names := treeFootprint(pid)
	return fmt.Sprintf("%d processes (%s), %d threads, PSS %.2f MiB, RSS %.1f MiB (shared pages counted in full)",
		procs, strings.Join(names, ", "), threads, float64(pss)/1024, float64(rss)/1024)
}

// daemonPID is the pid of the process listening on socket, from the
// kernel's peer credentials of a fresh connection.
func daemonPID(socket string) (int, error) {
	conn, err := net.Dial("unix", socket)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	raw, err := conn.(*net.UnixConn).SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if credErr != nil {
		return 0, fmt.Errorf("SO_PEERCRED: %w", credErr)
	}
	return int(cred.Pid), nil
}

// hostState is what the hold figure looks at to explain where it stopped.
type hostState struct {
	tasks                int64
	daemonFds, daemonThr int
	// mem, sessionsPSS (of this run's sessions' processes) and restPSS
	// (of the rest of the daemon's tree) account for what the held
	// sessions cost (memacct.go).
	mem                  memSample
	memErr               error
	sessionsPSS, restPSS int64
}

func (b *bench) hostState(daemon int) hostState {
	var s hostState
	s.tasks, _ = tasksInUse()
	s.mem, s.memErr = sampleMemory()
	s.daemonFds, s.daemonThr = -1, -1
	if daemon > 0 {
		s.daemonFds = fdCount(daemon)
		fmt.Sscan(procStatus(daemon, "Threads")["Threads"], &s.daemonThr)
		own, rest, _ := b.sessionProcs(daemon)
		s.sessionsPSS, _ = pssOf(own)
		s.restPSS, _ = pssOf(rest)
	}
	return s
}

func (b *bench) holdFigure() error {
	n := b.cfg.hold
	daemon, err := daemonPID(b.socket)
	if err != nil {
		warnf("hold: cannot tell the daemon's pid: %v", err)
	}
	if _, err := settledMemAvailable(b.ctx); err != nil {
		return err
	}
	before := b.hostState(daemon)
	var sessions sessionSet
	defer func() {
		if err := b.killSessions(&sessions); err != nil {
			warnf("hold: %v", err)
		}
	}()
	r := b.rampUp("hold", n, b.startIdle(&sessions))
	if err := b.ctx.Err(); err != nil {
		return err
	}
	if _, err := b.waitLive(r.started, time.Minute); err != nil {
		return err
	}
	// Give sessions that fail just after starting (a limit hit inside the
	// sandbox) the time to show up as ended.
	time.Sleep(2 * time.Second)
	held, err := b.waitLive(r.started, 0)
	if err != nil {
		return err
	}
	if _, err := settledMemAvailable(b.ctx); err != nil {
		return err
	}
	after := b.hostState(daemon)
	footprint := b.sessionFootprint()
	daemonTasks := -1
	if daemon > 0 {
		daemonTasks = treeTasks(daemon)
	}

	b.add(row{
		figure:  fmt.Sprintf("idle sessions held at once (asked %d)", n),
		value:   fmt.Sprint(held),
		target:  ">= 10000, no errors, unit's limits",
		verdict: verdict(held >= 10000 && r.firstErr == nil && r.stopped == ""),
	})
	switch {
	case r.firstErr != nil:
		b.note("hold: first error after %d sessions (started in %v): %v", r.started, r.elapsed.Round(time.Second), r.firstErr)
	case r.stopped != "":
		b.note("hold: %s, after %d sessions (started in %v)", r.stopped, r.started, r.elapsed.Round(time.Second))
	default:
		b.note("hold: all %d started without error in %v", r.started, r.elapsed.Round(time.Millisecond))
	}
	if held < r.started {
		b.note("hold: %d of the %d started were no longer live when counted", r.started-held, r.started)
	}
	if b.listTooBig != "" {
		b.note("client.List (and so sandboxctl ps) is refused with this many sessions: %s", b.listTooBig)
	}
	b.note("hold: one idle session is %s", footprint)
	var limits []unitLimit
	if b.cfg.unit != "" {
		limits, err = unitLimits(b.cfg.unit)
		if err != nil {
			b.note("hold: the unit's limits: %v", err)
		}
		for _, n := range unitLimitNotes(b.cfg.unit, limits, daemon, held, after.daemonFds, daemonTasks) {
			b.note("hold: %s", n)
		}
	}
	b.holdDiagnostics(daemon, held, before, after, limits)
	line := []string{"--hold", fmt.Sprint(n), "--clients", fmt.Sprint(b.cfg.clients)}
	if b.cfg.unit != "" {
		line = append(line, "--unit", b.cfg.unit)
	}
	b.reproduce(fmt.Sprintf("hold (%d idle sessions, then all killed):", n), b.benchtoolLine("hold", line...))
	return nil
}

// holdTarget is the number of sessions the issue asks one daemon to hold.
const holdTarget = 10000

// holdDiagnostics notes the limits a host puts on sessions, how much of
// each the held sessions took, and so how many sessions each would allow,
// here and under the unit's limits.
func (b *bench) holdDiagnostics(daemon, held int, before, after hostState, unit []unitLimit) {
	pidMax, _ := readInt("/proc/sys/kernel/pid_max")
	threadsMax, _ := readInt("/proc/sys/kernel/threads-max")
	per := func(a, b int64) float64 {
		if held == 0 {
			return 0
		}
		return float64(a-b) / float64(held)
	}
	tasksPer := per(after.tasks, before.tasks)
	fdsPer := per(int64(after.daemonFds), int64(before.daemonFds))
	var memPer float64
	if before.memErr == nil && after.memErr == nil && held > 0 {
		a := account(held, before.mem, after.mem, after.sessionsPSS-before.sessionsPSS, after.restPSS-before.restPSS)
		memPer = a.perSession() * mib
		b.note("hold: memory, %s; MemAvailable fell %.1f KiB per session", a.breakdown(), a.per(a.availDrop)/1024)
	}
	// limits collects, per limit, how many sessions it allows at the
	// measured cost per session, to name the one a larger ramp meets first.
	type limit struct {
		name   string
		allows float64
	}
	var limits []limit
	allows := func(name string, left int64, each float64) string {
		if each <= 0 {
			return "n/a"
		}
		limits = append(limits, limit{name, float64(left) / each})
		return fmt.Sprintf("~%.0f sessions", float64(left)/each)
	}
	b.note("hold: kernel.pid_max %d, kernel.threads-max %d; tasks in use %d before, %d with %d sessions held (%.2f per session): pid_max allows %s",
		pidMax, threadsMax, before.tasks, after.tasks, held, tasksPer, allows("kernel.pid_max (one pid per thread)", pidMax-before.tasks, tasksPer))
	var soft int64
	if daemon > 0 {
		lim := limitLine(daemon, "Max open files")
		fmt.Sscan(lim, &soft)
		b.note("hold: daemon pid %d: RLIMIT_NOFILE %s (soft hard units); open fds %d before, %d held (%.2f per session): allows %s; threads %d -> %d (Go keeps the threads that blocking calls of concurrent launches needed; they do not grow with the sessions held)",
			daemon, lim, before.daemonFds, after.daemonFds, fdsPer,
			allows("the daemon's RLIMIT_NOFILE", soft-int64(before.daemonFds), fdsPer), before.daemonThr, after.daemonThr)
	}
	avail := before.mem.avail
	b.note("hold: MemAvailable %d MiB before; at the accounted %.1f KiB per session, down to --min-available-mib allows %s",
		avail/mib, memPer/1024, allows("memory (down to --min-available-mib)", avail-b.cfg.minAvailMiB*mib, memPer))
	if len(limits) > 0 {
		first := slices.MinFunc(limits, func(a, b limit) int { return cmp.Compare(a.allows, b.allows) })
		b.note("hold: at these costs the first limit here is %s, at ~%.0f sessions", first.name, first.allows)
	}
	var ns []string
	for _, kind := range []string{"user", "mnt", "pid", "net", "ipc", "uts", "cgroup"} {
		if v, err := readInt("/proc/sys/user/max_" + kind + "_namespaces"); err == nil {
			ns = append(ns, fmt.Sprintf("%s %d", kind, v))
		}
	}
	b.note("hold: user.max_*_namespaces (per user; each session takes one of each kind it unshares): %s", strings.Join(ns, ", "))
	nrOpen, nrErr := readInt("/proc/sys/fs/nr_open")
	if nrErr == nil {
		b.note("hold: fs.nr_open (ceiling for RLIMIT_NOFILE) %d", nrOpen)
	}
	if unit == nil {
		return
	}
	// What the unit's limits would allow, at the costs measured here:
	// each limit named, met or not, for holdTarget sessions.
	var verdicts []string
	need := func(name string, want, have int64) {
		verdicts = append(verdicts, fmt.Sprintf("%s: needs %d, has %d: %s", name, want, have, map[bool]string{true: "met", false: "NOT met"}[want <= have]))
	}
	for _, l := range unit {
		v, ok := parseLimit(l.value)
		if !ok {
			continue
		}
		switch l.key {
		case "LimitNOFILE":
			// The kernel caps every RLIMIT_NOFILE at fs.nr_open.
			if nrErr == nil && (v == -1 || v > nrOpen) {
				v = nrOpen
			}
			need(fmt.Sprintf("LimitNOFILE=%s (the daemon's fds)", l.value), int64(before.daemonFds)+int64(fdsPer*holdTarget+0.5), v)
		case "TasksMax":
			if v != -1 {
				need(fmt.Sprintf("TasksMax=%s (tasks of the daemon's cgroup)", l.value), int64(after.daemonThr)+int64(tasksPer*holdTarget+0.5), v)
			}
		}
	}
	need("kernel.pid_max (tasks on the host)", before.tasks+int64(tasksPer*holdTarget+0.5), pidMax)
	if memPer > 0 {
		need("memory, MiB (accounted; MemAvailable before less --min-available-mib)", int64(memPer*holdTarget/mib+0.5), avail/mib-b.cfg.minAvailMiB)
	}
	quota, how := int64(sdaemon.DefaultMaxSessions), "the daemon's default"
	if v, ok, err := unitFlag(b.cfg.unit, "--max-sessions"); err == nil && ok {
		if q, err := strconv.ParseInt(v, 10, 64); err == nil {
			quota, how = q, "the unit's ExecStart"
		}
	}
	callers := (holdTarget + quota - 1) / max(quota, 1)
	need(fmt.Sprintf("per-caller quota of live sessions (--max-sessions, %s; this run raised it for its one caller)", how), holdTarget, quota)
	b.note("hold: under %s, %d idle sessions at the costs measured here: %s; the quota is per caller, so %d sessions are %d callers at their quota",
		b.cfg.unit, holdTarget, strings.Join(verdicts, "; "), holdTarget, callers)
}

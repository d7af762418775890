//go:build linux || darwin

package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/sandboxd/sandboxd/api/client"
	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/api/sandboxd/v1/sandboxdv1grpc"
)

// rawRequest is a request already encoded, sent as it is: the Go protobuf
// runtime refuses to encode a string that is not UTF-8, which is exactly
// what some of the bad inputs below are.
type rawRequest []byte

// rawCodec sends a rawRequest as it is and everything else as protobuf.
type rawCodec struct{ encoding.CodecV2 }

func (c rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	if r, ok := v.(rawRequest); ok {
		return mem.BufferSlice{mem.SliceBuffer(r)}, nil
	}
	return c.CodecV2.Marshal(v)
}

// rawConn is a gRPC connection to the suite's daemon that can send
// rawRequests.
func rawConn(t *testing.T) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///sandboxd",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", suite.daemon.socket)
		}),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(rawCodec{encoding.GetCodecV2("proto")})),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// badUTF8 marks where encode puts bytes that are not UTF-8.
const badUTF8 = "@NOTUTF8@"

// encode marshals m and replaces every badUTF8 in it with as many bytes
// that are not UTF-8; lengths stay as they were encoded.
func encode(t *testing.T, m proto.Message) rawRequest {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.ReplaceAll(b, []byte(badUTF8), append([]byte{0xff, 0xfe}, badUTF8[2:]...))
}

func startReq(st *sandboxdv1.Start) *sandboxdv1.SessionRequest {
	return &sandboxdv1.SessionRequest{Msg: &sandboxdv1.SessionRequest_Start{Start: st}}
}

func attachReq(id string) *sandboxdv1.SessionRequest {
	return &sandboxdv1.SessionRequest{Msg: &sandboxdv1.SessionRequest_Attach{Attach: &sandboxdv1.Attach{Id: id, ReadOnly: true}}}
}

func signalReq(sig int32) *sandboxdv1.SessionRequest {
	return &sandboxdv1.SessionRequest{Msg: &sandboxdv1.SessionRequest_Signal{Signal: &sandboxdv1.Signal{Signal: sig}}}
}

// sessionExchange sends msgs on a new Session stream (closing its sending
// side after them when closeSend), reads until the stream ends, and
// returns how it ended.
func sessionExchange(t *testing.T, conn *grpc.ClientConn, closeSend bool, msgs ...rawRequest) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), sessionTimeout)
	defer cancel()
	stream, err := conn.NewStream(ctx, &sandboxdv1grpc.Sandboxd_ServiceDesc.Streams[0], "/sandboxd.v1.Sandboxd/Session")
	if err != nil {
		return err
	}
	for _, m := range msgs {
		if err := stream.SendMsg(m); err != nil {
			break
		}
	}
	if closeSend {
		_ = stream.CloseSend()
	}
	for {
		var resp sandboxdv1.SessionResponse
		if err := stream.RecvMsg(&resp); err != nil {
			return err
		}
		if resp.GetExit() != nil {
			return fmt.Errorf("session ended with exit %v instead of an error", resp.GetExit())
		}
	}
}

// TestBadInputCodes sends every kind of bad input issue 22 lists straight
// to the daemon: each must be answered with InvalidArgument (NotFound for
// an unknown id) naming its field, in a message that does not echo an
// oversized input, nothing may run, and the daemon keeps serving.
func TestBadInputCodes(t *testing.T) {
	requireDaemon(t)
	conn := rawConn(t)
	rpc := sandboxdv1grpc.NewSandboxdClient(conn)
	hugeID := strings.Repeat("a", 1<<20)
	type exchange struct {
		closeSend bool
		msgs      []rawRequest
	}
	for _, c := range []struct {
		name  string
		code  codes.Code
		field string
		// stream builds the messages of a Session stream; unary makes
		// one unary call instead.
		stream func(t *testing.T, f *fixture, ran string) exchange
		unary  func(ctx context.Context) error
	}{
		{name: "argv not UTF-8", code: codes.InvalidArgument, field: "command.argv[3]", stream: func(t *testing.T, f *fixture, ran string) exchange {
			return exchange{msgs: []rawRequest{encode(t, startReq(probeStart(false, fsPolicy(list(f.dir), nil, nil), nil, "write", ran, badUTF8)))}}
		}},
		{name: "env value not UTF-8", code: codes.InvalidArgument, field: `command.env["X"]`, stream: func(t *testing.T, f *fixture, ran string) exchange {
			return exchange{msgs: []rawRequest{encode(t, startReq(probeStart(false, fsPolicy(list(f.dir), nil, nil), map[string]string{"X": badUTF8}, "write", ran)))}}
		}},
		{name: "env name not UTF-8", code: codes.InvalidArgument, field: "command.env", stream: func(t *testing.T, f *fixture, ran string) exchange {
			return exchange{msgs: []rawRequest{encode(t, startReq(probeStart(false, fsPolicy(list(f.dir), nil, nil), map[string]string{badUTF8: "x"}, "write", ran)))}}
		}},
		{name: "write root not UTF-8", code: codes.InvalidArgument, field: "policy.filesystem.write[1]", stream: func(t *testing.T, f *fixture, ran string) exchange {
			return exchange{msgs: []rawRequest{encode(t, startReq(probeStart(false, fsPolicy(list(f.dir, "/var/tmp/"+badUTF8), nil, nil), nil, "write", ran)))}}
		}},
		{name: "cwd not UTF-8", code: codes.InvalidArgument, field: "command.cwd", stream: func(t *testing.T, f *fixture, ran string) exchange {
			st := probeStart(false, fsPolicy(list(f.dir), nil, nil), nil, "write", ran)
			st.Command.Cwd = "/" + badUTF8
			return exchange{msgs: []rawRequest{encode(t, startReq(st))}}
		}},
		{name: "stream closed before its first message", code: codes.InvalidArgument, field: "start", stream: func(t *testing.T, f *fixture, ran string) exchange {
			return exchange{closeSend: true}
		}},
		{name: "memory limit out of range", code: codes.InvalidArgument, field: "policy.limits.memory_bytes", stream: func(t *testing.T, f *fixture, ran string) exchange {
			p := fsPolicy(list(f.dir), nil, nil)
			p.Limits = &sandboxdv1.Limits{MemoryBytes: 1 << 62}
			return exchange{msgs: []rawRequest{encode(t, startReq(probeStart(false, p, nil, "write", ran)))}}
		}},
		{name: "pids limit out of range", code: codes.InvalidArgument, field: "policy.limits.pids", stream: func(t *testing.T, f *fixture, ran string) exchange {
			p := fsPolicy(list(f.dir), nil, nil)
			p.Limits = &sandboxdv1.Limits{Pids: 1 << 30}
			return exchange{msgs: []rawRequest{encode(t, startReq(probeStart(false, p, nil, "write", ran)))}}
		}},
		{name: "second Start on a stream", code: codes.InvalidArgument, field: "start", stream: func(t *testing.T, f *fixture, ran string) exchange {
			st := probeStart(false, nil, nil, "hold", "second-start")
			return exchange{msgs: []rawRequest{encode(t, startReq(st)), encode(t, startReq(probeStart(false, fsPolicy(list(f.dir), nil, nil), nil, "write", ran)))}}
		}},
		{name: "Attach after a Start on a stream", code: codes.InvalidArgument, field: "start", stream: func(t *testing.T, f *fixture, ran string) exchange {
			return exchange{msgs: []rawRequest{encode(t, startReq(probeStart(false, nil, nil, "hold", "second-attach"))), encode(t, attachReq("0123456789abcdef"))}}
		}},
		{name: "in-stream signal 9999", code: codes.InvalidArgument, field: "signal", stream: func(t *testing.T, f *fixture, ran string) exchange {
			return exchange{msgs: []rawRequest{encode(t, startReq(probeStart(false, nil, nil, "hold", "signal-9999"))), encode(t, signalReq(9999))}}
		}},
		{name: "in-stream signal -1", code: codes.InvalidArgument, field: "signal", stream: func(t *testing.T, f *fixture, ran string) exchange {
			return exchange{msgs: []rawRequest{encode(t, startReq(probeStart(false, nil, nil, "hold", "signal-minus-1"))), encode(t, signalReq(-1))}}
		}},
		{name: "in-stream stdin not decodable", code: codes.InvalidArgument, field: "SessionRequest", stream: func(t *testing.T, f *fixture, ran string) exchange {
			return exchange{msgs: []rawRequest{encode(t, startReq(probeStart(false, nil, nil, "hold", "garbage"))), rawRequest{0xff, 0xff, 0xff}}}
		}},
		{name: "environment of 1 MiB", code: codes.InvalidArgument, field: "command.env", stream: func(t *testing.T, f *fixture, ran string) exchange {
			env := map[string]string{}
			for i := range 16 {
				env[fmt.Sprintf("BIG%d", i)] = strings.Repeat("x", 64<<10)
			}
			return exchange{msgs: []rawRequest{encode(t, startReq(probeStart(false, fsPolicy(list(f.dir), nil, nil), env, "write", ran)))}}
		}},
		{name: "one variable past execve's limit", code: codes.InvalidArgument, field: `command.env["BIG"]`, stream: func(t *testing.T, f *fixture, ran string) exchange {
			env := map[string]string{"BIG": strings.Repeat("x", 200<<10)}
			return exchange{msgs: []rawRequest{encode(t, startReq(probeStart(false, fsPolicy(list(f.dir), nil, nil), env, "write", ran)))}}
		}},
		{name: "one argument past execve's limit", code: codes.InvalidArgument, field: "command.argv[3]", stream: func(t *testing.T, f *fixture, ran string) exchange {
			return exchange{msgs: []rawRequest{encode(t, startReq(probeStart(false, fsPolicy(list(f.dir), nil, nil), nil, "write", ran, strings.Repeat("x", 200<<10))))}}
		}},
		{name: "20000 write roots", code: codes.InvalidArgument, field: "policy.filesystem", stream: func(t *testing.T, f *fixture, ran string) exchange {
			roots := []string{f.dir}
			for i := range 20000 {
				roots = append(roots, fmt.Sprintf("%s/w%d", f.dir, i))
			}
			return exchange{msgs: []rawRequest{encode(t, startReq(probeStart(false, fsPolicy(roots, nil, nil), nil, "write", ran)))}}
		}},
		{name: "attach to an id of 1 MiB", code: codes.InvalidArgument, field: "attach.id", stream: func(t *testing.T, f *fixture, ran string) exchange {
			return exchange{msgs: []rawRequest{encode(t, attachReq(hugeID))}}
		}},
		{name: "inspect an id of 1 MiB", code: codes.NotFound, field: "session", unary: func(ctx context.Context) error {
			_, err := rpc.Inspect(ctx, &sandboxdv1.InspectRequest{Id: hugeID})
			return err
		}},
		{name: "kill an id of 1 MiB", code: codes.NotFound, field: "session", unary: func(ctx context.Context) error {
			_, err := rpc.Kill(ctx, &sandboxdv1.KillRequest{Id: hugeID})
			return err
		}},
		{name: "inspect an id not UTF-8", code: codes.InvalidArgument, field: "id", unary: func(ctx context.Context) error {
			return conn.Invoke(ctx, "/sandboxd.v1.Sandboxd/Inspect", encode(t, &sandboxdv1.InspectRequest{Id: badUTF8}), &sandboxdv1.SessionInfo{})
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			requireDaemon(t)
			f := newFixture(t)
			ran := f.path("ran")
			var err error
			if c.unary != nil {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				err = c.unary(ctx)
				cancel()
			} else {
				ex := c.stream(t, f, ran)
				err = sessionExchange(t, conn, ex.closeSend, ex.msgs...)
			}
			st := status.Convert(err)
			if st.Code() != c.code || !strings.Contains(st.Message(), c.field) {
				t.Errorf("got %v %.300q, want %v naming %s", st.Code(), st.Message(), c.code, c.field)
			}
			if len(st.Message()) > 512 {
				t.Errorf("message of %d bytes echoes the input", len(st.Message()))
			}
			absent(t, ran)
			stillServing(t)
		})
	}
}

// TestConcurrentSandboxctlRuns: 200 sandboxctl processes at once, as a
// burst of agents would start them. Every one must run its command and
// report its own exit code: a busy daemon queues launches or answers
// ResourceExhausted (a caller at its quota of launches in flight) or
// closes connections (at its quota of connections), and the client
// retries; none may fail for want of an answer within a fixed time. On
// the suite's daemon, and on one whose quotas are small enough that most
// of the burst is refused at first.
func TestConcurrentSandboxctlRuns(t *testing.T) {
	requireDaemon(t)
	t.Run("suite daemon", func(t *testing.T) { concurrentRuns(t, suite.daemon) })
	t.Run("small quotas", func(t *testing.T) {
		d, err := startDaemonWith(filepath.Join(suite.root, "burst"), suite.wrap, "--max-connections", "32", "--max-launches", "4")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(d.stop)
		concurrentRuns(t, d)
	})
}

func concurrentRuns(t *testing.T, d *daemonProc) {
	const n = 200
	f := newFixture(t)
	type result struct {
		cliResult
		err error
	}
	results := make([]result, n)
	begin := time.Now()
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() {
			cmd := exec.Command(suite.sandboxctl, "--socket", d.socket, "run", "--", "sh", "-c", "echo $$; exit 7")
			cmd.Dir = f.dir
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			r := result{cliResult: cliResult{stdout: stdout.String(), stderr: stderr.String()}}
			var ee *exec.ExitError
			switch {
			case errors.As(err, &ee):
				r.code = ee.ExitCode()
			case err != nil:
				r.err = err
			}
			results[i] = r
		})
	}
	wg.Wait()
	t.Logf("%d concurrent runs took %v", n, time.Since(begin).Round(time.Millisecond))
	pid := regexp.MustCompile(`^[0-9]+\n$`)
	failed := 0
	for i, r := range results {
		if r.err != nil || r.code != 7 || !pid.MatchString(r.stdout) {
			failed++
			if failed <= 5 {
				t.Errorf("run %d: exit %d (%v), stdout %q, stderr %q; want exit 7 and a pid", i, r.code, r.err, r.stdout, r.stderr)
			}
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d concurrent runs failed", failed, n)
	}
}

// asUser runs sandboxctl on d's socket as uid, with groups.
func asUser(t *testing.T, d *daemonProc, uid int, groups []uint32, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), sessionTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, suite.sandboxctl, append([]string{"--socket", d.socket}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid), Groups: groups}}
	cmd.Dir = "/"
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := cliResult{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("sandboxctl as uid %d: %v", uid, err)
	}
	return r
}

// twoUserDaemon starts a daemon with extra flags whose socket two users,
// userA and userB, may use besides root.
func twoUserDaemon(t *testing.T, name string, extra ...string) *daemonProc {
	t.Helper()
	if !suite.asRoot {
		t.Skip("needs root to act as two other users; the rootless run has one user")
	}
	d, err := startDaemonWith(filepath.Join(suite.root, name), suite.wrap, append([]string{"--socket-group", strconv.Itoa(userGroup)}, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.stop)
	return d
}

const userA, userB, userGroup = 4242, 4343, 4242

var userGroups = []uint32{userGroup}

// TestQuotaOneCallerOthersServed: a caller at its quota of live sessions
// is refused with ResourceExhausted naming the quota, at once, while
// another caller is served as before.
func TestQuotaOneCallerOthersServed(t *testing.T) {
	d := twoUserDaemon(t, "quota", "--max-sessions", "2")
	var ids []string
	for range 2 {
		r := asUser(t, d, userA, userGroups, "run", "--detach", "--", "/bin/sleep", "60")
		if r.code != 0 {
			t.Fatalf("run --detach as %d: exit %d %q", userA, r.code, r.stderr)
		}
		ids = append(ids, strings.TrimSpace(r.stdout))
	}
	t.Cleanup(func() {
		for _, id := range ids {
			asUser(t, d, 0, []uint32{0}, "kill", id)
		}
	})
	begin := time.Now()
	r := asUser(t, d, userA, userGroups, "run", "--", "/bin/true")
	if r.code != client.ExitDaemonFailed || !strings.Contains(r.stderr, "--max-sessions") {
		t.Errorf("uid %d's third session: exit %d %q, want %d naming --max-sessions", userA, r.code, r.stderr, client.ExitDaemonFailed)
	}
	if took := time.Since(begin); took > 20*time.Second {
		t.Errorf("the refusal took %v: a quota of live sessions must not be retried as if busy", took)
	}
	if m := metricsText(t, d); !strings.Contains(m, `sandboxd_refusals_total{field="quota.max-sessions"} 1`) {
		t.Errorf("the refusal is not counted in sandboxd_refusals_total{field=\"quota.max-sessions\"}")
	}
	for uid, groups := range map[int][]uint32{userB: userGroups, 0: {0}} {
		if r := asUser(t, d, uid, groups, "run", "--", "sh", "-c", "exit 3"); r.code != 3 {
			t.Errorf("uid %d while uid %d is at its quota: exit %d %q, want 3", uid, userA, r.code, r.stderr)
		}
	}
	// The quota is of sessions not yet ended: one ending frees a place.
	if r := asUser(t, d, 0, []uint32{0}, "kill", ids[0]); r.code != 0 {
		t.Fatalf("kill: %q", r.stderr)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := asUser(t, d, userA, userGroups, "run", "--", "sh", "-c", "exit 4")
		if r.code == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("uid %d still refused after one of its sessions ended: exit %d %q", userA, r.code, r.stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestEndedSessionsKeptPerCaller: one caller's many ended sessions never
// push out another's; each caller keeps its own last --retain-ended.
func TestEndedSessionsKeptPerCaller(t *testing.T) {
	const keep = 3
	d := twoUserDaemon(t, "retain", "--retain-ended", strconv.Itoa(keep))
	r := asUser(t, d, userA, userGroups, "run", "--detach", "--", "sh", "-c", "echo kept; exit 5")
	if r.code != 0 {
		t.Fatalf("run --detach: exit %d %q", r.code, r.stderr)
	}
	aID := strings.TrimSpace(r.stdout)
	c := dialDaemon(t, d)
	ended := func(id string) *sandboxdv1.SessionInfo {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			info, err := c.Inspect(ctx, id)
			cancel()
			if err != nil {
				t.Fatalf("inspect %s: %v", id, err)
			}
			if info.GetState() == sandboxdv1.State_EXITED {
				return info
			}
			if time.Now().After(deadline) {
				t.Fatalf("session %s still %v", id, info.GetState())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	ended(aID)
	var bIDs []string
	for range keep + 2 {
		r := asUser(t, d, userB, userGroups, "run", "--detach", "--", "/bin/true")
		if r.code != 0 {
			t.Fatalf("uid %d run: exit %d %q", userB, r.code, r.stderr)
		}
		id := strings.TrimSpace(r.stdout)
		ended(id)
		bIDs = append(bIDs, id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A session is filed among the ended ones just after its end shows.
	for {
		_, err := c.Inspect(ctx, bIDs[0])
		if status.Code(err) == codes.NotFound {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("uid %d's oldest of %d ended sessions is still kept (%v): retention is not bounded per caller", userB, keep+2, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	info, err := c.Inspect(ctx, aID)
	if err != nil || info.GetExitCode() != 5 {
		t.Fatalf("uid %d's ended session after uid %d ended %d: %v, %v; want it kept with exit code 5", userA, userB, keep+2, info, err)
	}
	if out := asUser(t, d, userA, userGroups, "attach", aID); !strings.Contains(out.stdout, "kept") || out.code != 5 {
		t.Errorf("attach to uid %d's ended session: exit %d, stdout %q; want its scrollback and exit 5", userA, out.code, out.stdout)
	}
}

// TestNoInputWatchNoise: a session whose stdin the client closes at once
// (sandboxctl with stdin from /dev/null) is not a fault the daemon logs.
func TestNoInputWatchNoise(t *testing.T) {
	f := newFixture(t)
	var ids []string
	for range 5 {
		r := sandboxctl(t, f.dir, "run", "--", "sh", "-c", "echo $SANDBOXD_SESSION")
		if r.code != 0 {
			t.Fatalf("exit %d %q", r.code, r.stderr)
		}
		ids = append(ids, strings.TrimSpace(r.stdout))
	}
	log := suite.daemon.logTail()
	for _, id := range ids {
		if strings.Contains(log, "session "+id+": cannot tell when it waits for input") {
			t.Errorf("daemon logged the input watch of session %s as failing:\n%s", id, log)
		}
	}
}

func metricsText(t *testing.T, d *daemonProc) string {
	t.Helper()
	resp, err := http.Get(metricsURL(t, d))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

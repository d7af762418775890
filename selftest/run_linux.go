package selftest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/types/known/timestamppb"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/launcher"
	"github.com/sandboxd/sandboxd/policy"
)

// maxOutput bounds what is kept of the probe's stdout and stderr: a few
// lines are expected, and a misbehaving probe must not grow the daemon.
const maxOutput = 64 << 10

// drainGrace is how long output may still be read once the probe has been
// reaped; nothing else should hold the pipes then.
const drainGrace = 2 * time.Second

// Run starts the probe through b.Start as uid:gid under a policy that reads
// everything, writes one directory, denies one file and has no network,
// and reports what the sandbox could and could not do. dir is where the
// fixtures go; it must be visible to sandboxes at the same path (so not
// /tmp, which they see as a private tmpfs) and searchable by uid:gid, see
// CheckDir. ctx bounds the whole run; the probe is killed when it ends.
func Run(ctx context.Context, b launcher.Backend, uid, gid uint32, dir string) *sandboxdv1.SelfTest {
	st := &sandboxdv1.SelfTest{Ran: timestamppb.Now()}
	st.Checks, st.MechanismSet = run(ctx, b, uid, gid, dir)
	st.Passed = passed(st.Checks)
	return st
}

func failed(name, detail string) []*sandboxdv1.SelfTestCheck {
	return []*sandboxdv1.SelfTestCheck{{Name: name, Detail: detail}}
}

func run(ctx context.Context, b launcher.Backend, uid, gid uint32, dir string) ([]*sandboxdv1.SelfTestCheck, string) {
	if err := CheckDir(dir, uid, gid); err != nil {
		return failed("setup", err.Error()), ""
	}
	fx, err := newFixtures(dir, uid, gid)
	if err != nil {
		return failed("setup", err.Error()), ""
	}
	defer fx.close()

	pol := &sandboxdv1.Policy{
		Filesystem: &sandboxdv1.Filesystem{
			Read:  sandboxdv1.Filesystem_ALL,
			Write: []string{fx.writeRoot},
			Deny:  []string{fx.secret},
		},
		Network: &sandboxdv1.Network{Mode: sandboxdv1.Network_NONE},
	}
	// The same validation and normal form sessions get, so the backend sees
	// what it would see from a client.
	if err := policy.Validate(pol); err != nil {
		return failed("setup", fmt.Sprintf("self-test policy: %v", err)), ""
	}
	pol = policy.Normalize(pol)

	stdin, err := os.Open(os.DevNull)
	if err != nil {
		return failed("setup", fmt.Sprintf("open stdin: %v", err)), ""
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		stdin.Close()
		return failed("setup", fmt.Sprintf("stdout pipe: %v", err)), ""
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		stdin.Close()
		outR.Close()
		outW.Close()
		return failed("setup", fmt.Sprintf("stderr pipe: %v", err)), ""
	}
	defer outR.Close()
	defer errR.Close()

	spec := launcher.Spec{
		SessionID: "selftest-" + randomHex(),
		Policy:    pol,
		Digest:    policy.Digest(pol),
		Argv:      fx.argv(),
		Env:       []string{"PATH=/usr/bin:/bin"},
		Cwd:       "/",
		UID:       uid,
		GID:       gid,
		Stdio:     launcher.Stdio{Stdin: stdin, Stdout: outW, Stderr: errW},
	}
	proc, err := b.Start(ctx, spec)
	// The child has its copies; ours would keep the pipes from reaching EOF.
	stdin.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		var u *launcher.Unenforceable
		if errors.As(err, &u) {
			return failed("start", u.Error()), ""
		}
		return failed("start", fmt.Sprintf("start the probe: %v", err)), ""
	}
	mech := proc.Enforcement().GetMechanismSet()
	stopKill := context.AfterFunc(ctx, func() { proc.Kill() })
	defer stopKill()

	var stdout, stderr bytes.Buffer
	var readers sync.WaitGroup
	readers.Go(func() { io.Copy(&stdout, io.LimitReader(outR, maxOutput)) })
	readers.Go(func() { io.Copy(&stderr, io.LimitReader(errR, maxOutput)) })
	status, waitErr := proc.Wait()
	drained := make(chan struct{})
	go func() {
		readers.Wait()
		close(drained)
	}()
	select {
	case <-drained:
	case <-time.After(drainGrace):
		// Closing unblocks the readers; what they have is what there is.
		outR.Close()
		errR.Close()
		<-drained
	}

	checks := []*sandboxdv1.SelfTestCheck{{
		Name:   "start",
		Ok:     true,
		Detail: fmt.Sprintf("backend %s started the probe as uid %d under mechanism set %s", b.Name(), uid, orUnknown(mech)),
	}}
	checks = append(checks, evaluate(stdout.Bytes())...)
	checks = append(checks, exitCheck(ctx, status, waitErr, stderr.String()))
	return checks, mech
}

// exitCheck passes when the probe exited 0: it reports every step and
// exits 0 whatever the steps found, so anything else means it did not run
// to the end.
func exitCheck(ctx context.Context, st launcher.Status, waitErr error, stderr string) *sandboxdv1.SelfTestCheck {
	c := &sandboxdv1.SelfTestCheck{Name: "exit"}
	switch {
	case waitErr != nil:
		c.Detail = fmt.Sprintf("wait for the probe: %v", waitErr)
	case st.Signal != 0 && ctx.Err() != nil:
		c.Detail = fmt.Sprintf("the probe was killed: %v", context.Cause(ctx))
	case st.Signal != 0:
		c.Detail = fmt.Sprintf("the probe was killed by signal %d (%v)", int(st.Signal), st.Signal)
	case st.ExitCode != 0:
		c.Detail = fmt.Sprintf("the probe exited %d", st.ExitCode)
	default:
		c.Ok, c.Detail = true, "the probe exited 0"
	}
	if !c.Ok {
		if s := strings.TrimSpace(stderr); s != "" {
			c.Detail += "; stderr: " + lastLines(s, 5)
		}
	}
	return c
}

func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

func randomHex() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// fixtures are the host-side objects the probe is pointed at. Each one the
// probe must be denied is owned by, or open to, the sandbox's uid, so that
// only the sandbox can be what denies it.
type fixtures struct {
	scratch   string
	probe     string
	writeRoot string
	outside   string
	secret    string
	tcp       net.Listener
	unix      net.Listener
	daemon    string // "pid:starttime" of this process
	// lock is held on scratch's lockName while the fixtures are in use.
	lock *os.File
}

// scratchPrefix names the fixtures' directory; MkdirTemp appends up to 10
// digits.
const scratchPrefix = "sandboxd-selftest-"

// socketName is the host unix socket among the fixtures.
const socketName = "host.sock"

// maxSocketPath is the longest path a unix socket can be bound or
// connected at (sun_path, less its terminating NUL).
const maxSocketPath = 107

// staleAfter is when a fixtures directory without an owner's lock is
// surely left over from a self-test whose process was killed before it
// could clean up: far beyond any bound a caller gives Run.
const staleAfter = time.Hour

// lockName is the file in a fixtures directory that its owner holds an
// exclusive flock on while it uses them. The kernel lets the lock go with
// the process, so a directory whose lock is free is left over, from a
// daemon killed during its start-up self-test (a CI run's SIGKILL),
// and goes at the next start rather than an hour later.
const lockName = ".owner.lock"

// lockFixtures takes the lock of the fixtures directory scratch. The lock
// file is made and locked under another name and renamed into place, so
// that no one finds it free before its owner holds it.
func lockFixtures(scratch string) (*os.File, error) {
	f, err := os.CreateTemp(scratch, ".locking-")
	if err != nil {
		return nil, fmt.Errorf("fixture lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		os.Remove(f.Name())
		if errors.Is(err, unix.ENOLCK) || errors.Is(err, unix.EOPNOTSUPP) {
			// A filesystem without locks (NFS mounted nolock, some FUSE):
			// the directory goes by its age alone, as before the lock.
			return nil, nil
		}
		return nil, fmt.Errorf("fixture lock: %w", err)
	}
	if err := os.Rename(f.Name(), filepath.Join(scratch, lockName)); err != nil {
		f.Close()
		return nil, fmt.Errorf("fixture lock: %w", err)
	}
	return f, nil
}

// removeStale removes the fixtures directories in dir that this user made
// and whose owner is gone: its lock is free, or, for a directory without
// one (made before the lock, or by an owner killed before it took it),
// it is older than staleAfter. Each holds a copy of the binary (31 MB for
// the daemon), and a daemon killed during its start-up self-test would
// otherwise leave one behind each time.
func removeStale(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), scratchPrefix) {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue
		}
		// Only our own: in a shared directory such as /var/tmp, a name
		// proves nothing.
		if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int64(st.Uid) != int64(os.Geteuid()) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		// Non-blocking: a FIFO in its place must not hang the start.
		lock, err := os.OpenFile(filepath.Join(path, lockName), os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if time.Since(fi.ModTime()) >= staleAfter {
				os.RemoveAll(path)
			}
		case err != nil:
		default:
			// Held while the directory goes, so that its owner, were it
			// somehow alive, could not be using it meanwhile.
			if unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil {
				os.RemoveAll(path)
			}
			lock.Close()
		}
	}
}

func newFixtures(dir string, uid, gid uint32) (_ *fixtures, err error) {
	removeStale(dir)
	scratch, err := os.MkdirTemp(dir, scratchPrefix)
	if err != nil {
		return nil, fmt.Errorf("scratch directory: %w", err)
	}
	fx := &fixtures{scratch: scratch}
	defer func() {
		if err != nil {
			fx.close()
		}
	}()
	if fx.lock, err = lockFixtures(scratch); err != nil {
		return nil, err
	}
	// MkdirTemp makes it 0700; the sandbox's uid must reach in.
	if err := os.Chmod(scratch, 0o755); err != nil {
		return nil, fmt.Errorf("scratch directory: %w", err)
	}
	fx.probe = filepath.Join(scratch, ProbeName)
	if err := copyExecutable(fx.probe); err != nil {
		return nil, err
	}
	fx.writeRoot = filepath.Join(scratch, "write")
	fx.outside = filepath.Join(scratch, "outside")
	for _, d := range []string{fx.writeRoot, fx.outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return nil, fmt.Errorf("fixture: %w", err)
		}
		if err := chownTo(d, uid, gid); err != nil {
			return nil, err
		}
	}
	fx.secret = filepath.Join(scratch, "secret")
	if err := os.WriteFile(fx.secret, []byte("sandboxd self-test secret\n"), 0o644); err != nil {
		return nil, fmt.Errorf("fixture: %w", err)
	}
	if err := chownTo(fx.secret, uid, gid); err != nil {
		return nil, err
	}
	if fx.tcp, err = net.Listen("tcp4", "127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("fixture: %w", err)
	}
	sock := filepath.Join(scratch, socketName)
	if fx.unix, err = net.Listen("unix", sock); err != nil {
		return nil, fmt.Errorf("fixture: %w", err)
	}
	if err := os.Chmod(sock, 0o777); err != nil {
		return nil, fmt.Errorf("fixture: %w", err)
	}
	start, err := startTime("/proc/self/stat")
	if err != nil {
		return nil, fmt.Errorf("fixture: %w", err)
	}
	fx.daemon = fmt.Sprintf("%d:%d", os.Getpid(), start)
	return fx, nil
}

func (fx *fixtures) argv() []string {
	return []string{
		fx.probe,
		StepWriteRoot + "=" + filepath.Join(fx.writeRoot, "probe"),
		StepWriteOutside + "=" + filepath.Join(fx.outside, "probe"),
		StepChmodOutside + "=" + fx.outside,
		StepReadDeny + "=" + fx.secret,
		StepTCPLoopback + "=" + fx.tcp.Addr().String(),
		StepUnixSocket + "=" + fx.unix.Addr().String(),
		StepSignalDaemon + "=" + fx.daemon,
		StepNonRoot,
	}
}

func (fx *fixtures) close() {
	if fx.tcp != nil {
		fx.tcp.Close()
	}
	if fx.unix != nil {
		fx.unix.Close()
	}
	os.RemoveAll(fx.scratch)
	if fx.lock != nil {
		fx.lock.Close()
	}
}

// copyExecutable copies the running binary to path, mode 0755: the
// sandbox's uid may not be able to reach the original.
func copyExecutable(path string) error {
	src, err := os.Open("/proc/self/exe")
	if err != nil {
		return fmt.Errorf("copy probe: %w", err)
	}
	defer src.Close()
	dst, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return fmt.Errorf("copy probe: %w", err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return fmt.Errorf("copy probe to %s: %w", path, err)
	}
	if err := dst.Close(); err != nil {
		return fmt.Errorf("copy probe to %s: %w", path, err)
	}
	// The umask may have taken bits away.
	if err := os.Chmod(path, 0o755); err != nil {
		return fmt.Errorf("copy probe: %w", err)
	}
	return nil
}

// chownTo gives path to the sandbox's identity. Only root can; an
// unprivileged daemon's sandboxes run as itself and own its files already.
func chownTo(path string, uid, gid uint32) error {
	if os.Geteuid() != 0 {
		return nil
	}
	if err := os.Lchown(path, int(uid), int(gid)); err != nil {
		return fmt.Errorf("fixture: %w", err)
	}
	return nil
}

// startTime is field 22 of a /proc/PID/stat file: when the process started,
// in clock ticks since boot. With the pid it names one process; a pid
// alone may name another one inside a pid namespace.
func startTime(statPath string) (uint64, error) {
	b, err := os.ReadFile(statPath)
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may contain spaces and parentheses; the
	// fields after it are plain.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("%s: no command name", statPath)
	}
	fields := strings.Fields(string(b[i+1:]))
	const startField = 22 - 3 // fields after the name begin with field 3
	if len(fields) <= startField {
		return 0, fmt.Errorf("%s: %d fields", statPath, len(fields)+2)
	}
	return strconv.ParseUint(fields[startField], 10, 64)
}

// CheckDir says whether dir can hold the self-test's fixtures: an existing
// absolute directory outside /tmp (sandboxes get a private /tmp, so the
// probe would not find them there), short enough for a unix socket path
// beneath it, on a mount that allows exec, whose every ancestor uid:gid may
// search.
func CheckDir(dir string, uid, gid uint32) error {
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("self-test directory %q is not absolute", dir)
	}
	dir = filepath.Clean(dir)
	if dir == "/tmp" || strings.HasPrefix(dir, "/tmp/") {
		return fmt.Errorf("self-test directory %s is inside /tmp, which sandboxes see as a private tmpfs", dir)
	}
	if n := len(dir) + len("/"+scratchPrefix+"4294967295/"+socketName); n > maxSocketPath {
		return fmt.Errorf("self-test directory %s is too long: its unix socket fixture would need a path of %d bytes, more than %d", dir, n, maxSocketPath)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("self-test directory: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("self-test directory %s is not a directory", dir)
	}
	// /run is often mounted noexec; the probe is started from here.
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		return fmt.Errorf("self-test directory: statfs %s: %w", dir, err)
	}
	if fs.Flags&unix.ST_NOEXEC != 0 {
		return fmt.Errorf("self-test directory %s is on a noexec mount, so the probe could not run from it", dir)
	}
	for d := dir; ; d = filepath.Dir(d) {
		var st syscall.Stat_t
		if err := syscall.Stat(d, &st); err != nil {
			return fmt.Errorf("self-test directory: stat %s: %w", d, err)
		}
		if !searchable(st, uid, gid) {
			return fmt.Errorf("self-test directory %s: uid %d gid %d cannot search %s (mode %o, owner %d:%d)",
				dir, uid, gid, d, st.Mode&0o7777, st.Uid, st.Gid)
		}
		if d == "/" {
			return nil
		}
	}
}

// searchable applies the permission bits the way the kernel does for a
// process with no supplementary groups, which is what sandboxes run with.
func searchable(st syscall.Stat_t, uid, gid uint32) bool {
	switch {
	case st.Uid == uid:
		return st.Mode&0o100 != 0
	case st.Gid == gid:
		return st.Mode&0o010 != 0
	default:
		return st.Mode&0o001 != 0
	}
}

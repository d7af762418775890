//go:build linux || darwin

package conformance

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

func (f *fixture) symlink(rel, target string) string {
	f.t.Helper()
	p := f.path(rel)
	if err := os.Symlink(target, p); err != nil {
		f.t.Fatal(err)
	}
	f.own(p)
	return p
}

func unixListener(t *testing.T, path string) (token string) {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(path, "@") {
		// The sandbox user must be able to connect if nothing else stops it.
		if err := os.Chmod(path, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	return serveToken(t, l)
}

// hostSleep starts a process on the host, outside any sandbox, for probes to
// try to signal.
func hostSleep(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

// hostAddress is an address of this host outside the loopback: the first
// IPv4 address of an interface that is up, or "" when there is none.
func hostAddress() string {
	ifaces, _ := net.Interfaces()
	for _, i := range ifaces {
		if i.Flags&net.FlagUp == 0 || i.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, _ := i.Addrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLinkLocalUnicast() {
				return n.IP.String()
			}
		}
	}
	return ""
}

// newDualOrigin starts an HTTP server on the host's 127.0.0.1 and [::1]
// at the same port, each answering with its own token. On a host without
// an IPv6 loopback it skips the test when ipv6 is required, and otherwise
// serves 127.0.0.1 alone.
func newDualOrigin(t *testing.T, required bool) origin {
	t.Helper()
	for range 20 {
		l6, err := net.Listen("tcp6", "[::1]:0")
		if err != nil {
			if required {
				t.Skipf("no IPv6 loopback on this host: %v", err)
			}
			t.Logf("no IPv6 loopback on this host (%v): serving 127.0.0.1 only", err)
			return newOrigin(t)
		}
		port := l6.Addr().(*net.TCPAddr).Port
		l4, err := net.Listen("tcp4", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			l6.Close()
			continue
		}
		return origin{port: port, token: httpOrigin(t, l4), token6: httpOrigin(t, l6)}
	}
	t.Fatal("found no port free on both 127.0.0.1 and [::1]")
	return origin{}
}

// denialWant is what one denial a case expects must say; empty fields are
// not compared. detail, when set, must be in the denial's detail, and
// needDetail asks for a detail at all.
type denialWant struct {
	field, operation, target, errno, detail string
	needDetail                              bool
}

func (w denialWant) String() string {
	return fmt.Sprintf("field %q operation %q target %q errno %q detail %q (required: %v)", w.field, w.operation, w.target, w.errno, w.detail, w.needDetail)
}

func (w denialWant) matches(d *sandboxdv1.Denial) bool {
	return d.GetField() == w.field &&
		(w.operation == "" || d.GetOperation() == w.operation) &&
		(w.target == "" || d.GetTarget() == w.target) &&
		(w.errno == "" || d.GetErrno() == w.errno) &&
		(!w.needDetail || d.GetDetail() != "") &&
		strings.Contains(d.GetDetail(), w.detail)
}

// recordedDenials waits until Inspect of session id lists a denial like
// each of wants, failing the test for those that do not appear within 10s
// (plus denialLag), and returns what it found, in the order of wants.
func recordedDenials(t *testing.T, id string, wants ...denialWant) []*sandboxdv1.Denial {
	t.Helper()
	found := make([]*sandboxdv1.Denial, len(wants))
	deadline := time.Now().Add(10*time.Second + denialLag)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		info, err := suite.client.Inspect(ctx, id)
		cancel()
		if err != nil {
			t.Fatalf("inspect %s: %v", id, err)
		}
		missing := 0
		for i, w := range wants {
			if j := slices.IndexFunc(info.GetRecentDenials(), w.matches); j >= 0 {
				found[i] = info.GetRecentDenials()[j]
			} else {
				missing++
			}
		}
		if missing == 0 {
			return found
		}
		if time.Now().After(deadline) {
			var seen strings.Builder
			for _, d := range info.GetRecentDenials() {
				fmt.Fprintf(&seen, "  %v\n", d)
			}
			for i, w := range wants {
				if found[i] == nil {
					t.Errorf("session %s: Inspect lists no denial with %v; it lists %d (count %d):\n%s", id, w, len(info.GetRecentDenials()), info.GetDenialCount(), seen.String())
				}
			}
			return found
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// auditedDenial waits until the suite daemon's audit log has a denial line
// of session id like w (field, operation, target), failing the test if
// none appears within 10s (plus denialLag).
func auditedDenial(t *testing.T, id string, w denialWant) {
	t.Helper()
	deadline := time.Now().Add(10*time.Second + denialLag)
	for {
		var lines []string
		for _, l := range readAudit(t, suite.daemon.state) {
			if l.Session != id {
				continue
			}
			lines = append(lines, l.raw)
			if d := l.Denial; l.Type == "denial" && d != nil && d.Field == w.field &&
				(w.operation == "" || d.Operation == w.operation) && (w.target == "" || d.Target == w.target) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Errorf("audit log: no denial of session %s with %v; its lines:\n%s", id, w, strings.Join(lines, "\n"))
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// enforcedBy fails the test unless the session's enforcement report names
// a mechanism for field: what a session reports comes from what the
// backend enforced.
func enforcedBy(t *testing.T, s *session, field string) {
	t.Helper()
	for _, f := range s.res.Enforcement.GetFields() {
		if f.GetField() == field && f.GetMechanism() != "" {
			t.Logf("%s enforced by: %s", field, f.GetMechanism())
			return
		}
	}
	t.Errorf("the enforcement report names no mechanism for %s: %v", field, s.res.Enforcement.GetFields())
}

package launcherlinux

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// landlockBackend is the backend forced to the namespace-less set; a kernel
// without what that set needs cannot run these tests, and says so.
func landlockBackend(t *testing.T) *backend {
	t.Helper()
	b := backendFor(t, SetLandlock).(*backend)
	if sf := SetLandlock.check(&sandboxdv1.Policy{}, b.host, false); sf != nil {
		t.Skipf("this host cannot run the landlock set: %s (%s)", sf.found, sf.mechanism)
	}
	return b
}

func TestLandlockSetStartsConfinedCommand(t *testing.T) {
	b := landlockBackend(t)
	host, _ := os.Hostname()
	out, serr, st := runWith(t, b, nil, "/bin/sh", "-c", "ipcmk -M 4096 >/dev/null 2>&1 || echo sysv-denied; id -u; grep -E '^(CapEff|CapPrm|NoNewPrivs|Seccomp):' /proc/self/status; hostname; echo x > /var/tmp/sandboxd-ll-probe; echo rc=$?; ls /proc | grep -c '^[0-9]' >/dev/null && echo sees-proc")
	t.Logf("stdout:\n%s\nstderr:\n%s", out, serr)
	if st.ExitCode != 0 {
		t.Fatalf("status %+v", st)
	}
	uid, _ := sandboxIdentity()
	for _, want := range []string{strconv.Itoa(int(uid)) + "\n", "CapPrm:\t0000000000000000", "CapEff:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2", host, "rc=2", "sysv-denied"} {
		if !strings.Contains(out+serr, want) {
			t.Errorf("missing %q", want)
		}
	}
}

func TestLandlockSetFilesystemAndNetwork(t *testing.T) {
	b := landlockBackend(t)
	w := hostDir(t, 0o777)
	other := hostDir(t, 0o777)
	os.MkdirAll(w+"/d", 0o777)
	os.Chmod(w+"/d", 0o777)
	secretDir := hostDir(t, 0o755)
	os.WriteFile(secretDir+"/key", []byte("k"), 0o644)
	os.WriteFile(secretDir+"/open", []byte("o"), 0o644)
	pol := &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{w}, Deny: []string{secretDir + "/key"}}}
	script := `echo a > ` + w + `/d/f && echo write-ok
echo b > ` + other + `/f || echo outside-denied
truncate -s 0 /etc/hostname 2>/dev/null || echo truncate-denied
cat ` + secretDir + `/key || echo deny-denied
cat ` + secretDir + `/open && echo sibling-ok
ln ` + secretDir + `/open ` + w + `/hard 2>/dev/null || echo link-denied
echo x > /dev/null && echo devnull-ok
`
	out, serr, st := runWith(t, b, pol, "/bin/sh", "-c", script)
	t.Logf("stdout:\n%s\nstderr:\n%s", out, serr)
	if st.ExitCode != 0 {
		t.Fatalf("status %+v", st)
	}
	for _, want := range []string{"write-ok", "outside-denied", "truncate-denied", "deny-denied", "sibling-ok", "link-denied", "devnull-ok"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q", want)
		}
	}
	if _, err := os.Stat(other + "/f"); err == nil {
		t.Error("the sandbox wrote outside its write roots")
	}
}

func TestLandlockSetRefusesWhatLandlockCannotExpress(t *testing.T) {
	b := landlockBackend(t)
	w := hostDir(t, 0o777)
	os.MkdirAll(w+"/.git", 0o777)
	for field, fs := range map[string]*sandboxdv1.Filesystem{
		"filesystem.read_only": {Write: []string{w}, ReadOnly: []string{w + "/.git"}},
		"filesystem.deny":      {Write: []string{w}, Deny: []string{w + "/.env"}},
		"filesystem.write":     {Write: []string{"/"}},
	} {
		p, err := b.Start(context.Background(), testSpec(t, &sandboxdv1.Policy{Filesystem: fs}, "/bin/true"))
		wantRefusal(t, p, err, field)
	}
}

// An orphaned background process must not outlive the session: without a
// pid namespace the init, as child subreaper, is what kills it.
func TestLandlockSetKillsOrphansAtExit(t *testing.T) {
	b := landlockBackend(t)
	out, _, st := runWith(t, b, nil, "/bin/sh", "-c", "(setsid sleep 1000 >/dev/null 2>&1 & echo $!) ; sleep 0.1")
	if st.ExitCode != 0 {
		t.Fatalf("status %+v", st)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		t.Fatalf("no pid in %q", out)
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("orphan %d survived the session", pid)
	}
}

func TestLandlockSetKillEndsTree(t *testing.T) {
	b := landlockBackend(t)
	dir := hostDir(t, 0o777)
	spec := testSpec(t, &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{dir}}}, "/bin/sh", "-c", "setsid sleep 1000 & echo $! > "+dir+"/pid; wait")
	p, err := b.Start(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	for i := 0; i < 100 && pid == 0; i++ {
		b, _ := os.ReadFile(filepath.Join(dir, "pid"))
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		time.Sleep(20 * time.Millisecond)
	}
	if pid == 0 {
		t.Fatal("background process did not start")
	}
	p.Kill()
	st, err := p.Wait()
	if err != nil || st.Signal == 0 && st.ExitCode == 0 {
		t.Fatalf("wait = %+v, %v", st, err)
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("process %d survived Kill", pid)
	}
}

package launcherlinux

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/launcher"
	"github.com/sandboxd/sandboxd/policy"
)

func TestMain(m *testing.M) {
	RunInitIfRequested()
	os.Exit(m.Run())
}

// run starts argv under pol with pipes and returns stdout, stderr and status.
func run(t *testing.T, pol *sandboxdv1.Policy, argv ...string) (string, string, launcher.Status) {
	t.Helper()
	b, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, _ := os.Pipe()
	errR, errW, _ := os.Pipe()
	devnull, _ := os.Open(os.DevNull)
	defer devnull.Close()
	uid, gid := uint32(os.Getuid()), uint32(os.Getgid())
	if uid == 0 {
		uid, gid = 65534, 65534
	}
	p, err := b.Start(context.Background(), launcher.Spec{
		Policy: policy.Normalize(pol), Argv: argv,
		Env: []string{"PATH=/usr/bin:/bin"}, UID: uid, GID: gid,
		Stdio: launcher.Stdio{Stdin: devnull, Stdout: outW, Stderr: errW},
	})
	outW.Close()
	errW.Close()
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	var out, serr bytes.Buffer
	done := make(chan struct{})
	go func() { out.ReadFrom(outR); close(done) }()
	serr.ReadFrom(errR)
	<-done
	st, err := p.Wait()
	if err != nil {
		t.Fatal(err)
	}
	return out.String(), serr.String(), st
}

func TestStartsConfinedCommand(t *testing.T) {
	out, serr, st := run(t, nil, "/bin/sh", "-c", "id; grep -E '^(CapEff|CapPrm|NoNewPrivs|Seccomp):' /proc/self/status; hostname; echo x > /etc/sandboxd-probe; echo rc=$?")
	t.Logf("stdout:\n%s\nstderr:\n%s", out, serr)
	if st.ExitCode != 0 || st.Signal != 0 {
		t.Fatalf("status %+v", st)
	}
	for _, want := range []string{"CapEff:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2", "sandbox", "rc=2", "Read-only file system"} {
		if !strings.Contains(out+serr, want) {
			t.Errorf("missing %q", want)
		}
	}
}

func TestFilesystemPolicy(t *testing.T) {
	w := t.TempDir()
	// The sandbox uid of a root daemon must be able to reach the root.
	os.Chmod(filepath.Dir(w), 0o755)
	os.Chmod(w, 0o777)
	os.MkdirAll(w+"/.git", 0o777)
	os.MkdirAll(w+"/secret", 0o777)
	os.WriteFile(w+"/secret/key", []byte("k"), 0o666)
	pol := &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{
		Write:    []string{w},
		ReadOnly: []string{w + "/.git", w + "/sub/.git"},
		Deny:     []string{w + "/secret"},
	}}
	script := `cd ` + w + `
echo a > ok && echo write-ok
echo b > .git/x || echo git-denied
mkdir -p sub/.git/hooks 2>/dev/null || echo sub-git-denied
cat secret/key || echo secret-denied
mv .git g2 || echo rename-denied
echo c > /tmp/t && echo tmp-ok
`
	out, serr, st := run(t, pol, "/bin/sh", "-c", script)
	t.Logf("stdout:\n%s\nstderr:\n%s", out, serr)
	if st.ExitCode != 0 {
		t.Fatalf("status %+v", st)
	}
	for _, want := range []string{"write-ok", "git-denied", "sub-git-denied", "secret-denied", "rename-denied", "tmp-ok"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q", want)
		}
	}
	if _, err := os.Stat(w + "/sub"); err == nil {
		t.Errorf("placeholder %s/sub left behind", w)
	}
}

package launcherlinux

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/launcher"
	"github.com/sandboxd/sandboxd/policy"
)

func TestMissingWriteRootIsRefusedAsSuch(t *testing.T) {
	missing := hostDir(t, 0o755) + "/not-made"
	_, err := newBackend(t).Start(context.Background(), testSpec(t, &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{missing}}}, "/bin/true"))
	var fe *policy.FieldError
	if !errors.As(err, &fe) || fe.Field != "filesystem.write[0]" {
		t.Fatalf("Start = %v, want a FieldError naming filesystem.write[0]", err)
	}
	if want := missing + " does not exist; create it first"; fe.Msg != want {
		t.Errorf("message %q, want %q", fe.Msg, want)
	}
	if strings.Contains(err.Error(), "lstat") {
		t.Errorf("message %q shows the lstat behind it", err)
	}
}

// A write root the sandbox uid may not write is refused, on every set,
// naming the root, its owner and mode, the uid and a remedy; so is a cwd
// it may not enter, instead of an execve error that blames the command.
func TestUnusableWriteRootAndCwdAreRefused(t *testing.T) {
	for _, set := range []MechanismSet{SetNamespaces, SetLandlock} {
		t.Run(string(set), func(t *testing.T) {
			b := backendFor(t, set)
			uid, _ := sandboxIdentity()
			// No write bit for anyone: neither the sandbox uid nor an
			// owner mapped to it may write here.
			w := hostDir(t, 0o555)
			p, err := b.Start(context.Background(), testSpec(t, &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{Write: []string{w}}}, "/bin/true"))
			wantRefusal(t, p, err, "filesystem.write")
			for _, want := range []string{w, fmt.Sprintf("uid %d", uid), fmt.Sprintf("owner %d, mode 0555", os.Geteuid()), "remedy: chown -R"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("refusal %q does not say %q", err, want)
				}
			}

			private := hostDir(t, 0o700)
			if err := os.Chown(private, 0, 0); err != nil && os.Geteuid() == 0 {
				t.Fatal(err)
			}
			if os.Geteuid() != 0 {
				// The test's own uid is the sandbox's: take its search
				// right away instead.
				if err := os.Chmod(private, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			spec := testSpec(t, nil, "/bin/true")
			spec.Cwd = private
			p, err = b.Start(context.Background(), spec)
			var ee *launcher.ExecError
			if !errors.As(err, &ee) {
				if err == nil {
					p.Kill()
					p.Wait()
				}
				t.Fatalf("Start in cwd %s = %v, want an ExecError", private, err)
			}
			mode := "0700"
			if os.Geteuid() != 0 {
				mode = "0600"
			}
			want := fmt.Sprintf("cwd %s is not accessible to the sandbox uid %d (owner %d, mode %s)", private, uid, os.Geteuid(), mode)
			if !strings.HasPrefix(err.Error(), want) || ee.ExitCode() != 126 {
				t.Errorf("Start in cwd %s = %q (exit %d), want %q... (exit 126)", private, err, ee.ExitCode(), want)
			}
		})
	}
}

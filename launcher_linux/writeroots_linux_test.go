package launcherlinux

import (
	"context"
	"errors"
	"strings"
	"testing"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
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

package daemon

import (
	"slices"
	"strings"
	"testing"
)

func TestBuildEnvWindows(t *testing.T) {
	env, err := buildEnv(false, `C:\`, map[string]string{"Path": `C:\tools`}, sessionIdentity{id: "s", digest: "d"})
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); strings.EqualFold(k, "PATH") {
			paths = append(paths, kv)
		}
		if strings.HasPrefix(kv, "TERM=") {
			t.Errorf("a pipe session got %s", kv)
		}
	}
	if len(paths) != 1 || paths[0] != `Path=C:\tools` {
		t.Errorf("PATH entries %q, want the request's alone", paths)
	}
	root, err := systemRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"SystemRoot=" + root, "windir=" + root, "USERPROFILE=C:\\", "HOME=C:\\", "SANDBOXD_SESSION=s"} {
		if !slices.Contains(env, want) {
			t.Errorf("environment %q lacks %q", env, want)
		}
	}
	tty, err := buildEnv(true, `C:\`, nil, sessionIdentity{id: "s", digest: "d"})
	if err != nil || !slices.Contains(tty, "TERM=xterm-256color") {
		t.Errorf("console session environment %q, %v: want TERM", tty, err)
	}
	for _, bad := range []map[string]string{
		{"sandboxd_session": "other"},
		{"FOO": "1", "foo": "2"},
	} {
		if _, err := buildEnv(false, `C:\`, bad, sessionIdentity{id: "s", digest: "d"}); err == nil {
			t.Errorf("buildEnv accepted %q", bad)
		}
	}
}

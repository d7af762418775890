package main

import (
	"io"
	"path/filepath"
	"runtime"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// A --policy file is resolved where sandboxctl runs: "~" against $HOME,
// relative paths against the current directory, enum values as the flags
// spell them, before anything is sent.
func TestParseRunPolicyFileLikeFlags(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the file names Unix paths")
	}
	t.Setenv("HOME", "/home/u")
	f := writePolicy(t, `{"filesystem": {"write": [".", "~/.cache/tool"], "read_only": [".git"], "deny": ["~/.ssh"]}, "network": {"mode": "none"}}`)
	start, err := parseRun([]string{"--policy", f, "true"}, "/home/u/proj", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := &sandboxdv1.Policy{
		Filesystem: &sandboxdv1.Filesystem{
			Write:    []string{"/home/u/proj", filepath.Join("/home/u", ".cache/tool")},
			ReadOnly: []string{"/home/u/proj/.git"},
			Deny:     []string{"/home/u/.ssh"},
		},
		Network: &sandboxdv1.Network{Mode: sandboxdv1.Network_NONE},
	}
	if !proto.Equal(start.GetPolicy(), want) {
		t.Errorf("policy %s\nwant   %s", protojson.Format(start.GetPolicy()), protojson.Format(want))
	}
}

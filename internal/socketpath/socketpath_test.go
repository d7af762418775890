package socketpath

import "testing"

func TestResolve(t *testing.T) {
	const macTMPDIR = "/var/folders/zz/zyxvpxvq6csfxvn_n0000000000000/T/"
	for _, tc := range []struct {
		name string
		env  map[string]string
		uid  int
		goos string
		want string
	}{
		{"override wins for root", map[string]string{Env: "/x.sock"}, 0, "linux", "/x.sock"},
		{"override wins for users", map[string]string{Env: "/x.sock", "XDG_RUNTIME_DIR": "/run/user/1000"}, 1000, "linux", "/x.sock"},
		{"root", map[string]string{"XDG_RUNTIME_DIR": "/run/user/0"}, 0, "linux", "/run/sandboxd/sandboxd.sock"},
		{"user with runtime dir", map[string]string{"XDG_RUNTIME_DIR": "/run/user/1000"}, 1000, "linux", "/run/user/1000/sandboxd.sock"},
		{"user without runtime dir", nil, 1000, "linux", "/tmp/sandboxd-1000/sandboxd.sock"},
		{"user with TMPDIR", map[string]string{"TMPDIR": "/tmp"}, 1000, "linux", "/tmp/sandboxd-1000/sandboxd.sock"},
		{"macOS override wins for root", map[string]string{Env: "/x.sock"}, 0, "darwin", "/x.sock"},
		{"macOS override wins for users", map[string]string{Env: "/x.sock", "TMPDIR": macTMPDIR}, 501, "darwin", "/x.sock"},
		{"macOS root", map[string]string{"TMPDIR": macTMPDIR, "XDG_RUNTIME_DIR": "/run/user/0"}, 0, "darwin", "/var/run/sandboxd/sandboxd.sock"},
		{"macOS user with runtime dir", map[string]string{"XDG_RUNTIME_DIR": "/Users/u/run", "TMPDIR": macTMPDIR}, 501, "darwin", "/Users/u/run/sandboxd.sock"},
		{"macOS user with TMPDIR", map[string]string{"TMPDIR": macTMPDIR}, 501, "darwin", "/var/folders/zz/zyxvpxvq6csfxvn_n0000000000000/T/sandboxd.sock"},
		{"macOS user without TMPDIR", nil, 501, "darwin", "/tmp/sandboxd-501/sandboxd.sock"},
		{"windows", nil, -1, "windows", `\\.\pipe\sandboxd`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := resolve(func(k string) string { return tc.env[k] }, tc.uid, tc.goos)
			if got != tc.want {
				t.Fatalf("resolve = %q, want %q", got, tc.want)
			}
		})
	}
}

package statedir

import "testing"

func TestResolve(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		uid  int
		home string
		goos string
		want string
	}{
		{"override wins", map[string]string{Env: "/srv/sd"}, 0, "/root", "linux", "/srv/sd"},
		{"root", map[string]string{"XDG_STATE_HOME": "/root/.local/state"}, 0, "/root", "linux", "/var/lib/sandboxd"},
		{"user with XDG_STATE_HOME", map[string]string{"XDG_STATE_HOME": "/home/u/st"}, 1000, "/home/u", "linux", "/home/u/st/sandboxd"},
		{"user", nil, 1000, "/home/u", "linux", "/home/u/.local/state/sandboxd"},
		{"user without home", nil, 1000, "", "linux", "/var/tmp/sandboxd-state-1000"},
		{"macOS override wins", map[string]string{Env: "/srv/sd"}, 0, "/var/root", "darwin", "/srv/sd"},
		{"macOS root", map[string]string{"XDG_STATE_HOME": "/var/root/st"}, 0, "/var/root", "darwin", "/var/db/sandboxd"},
		{"macOS user", map[string]string{"XDG_STATE_HOME": "/Users/u/st"}, 501, "/Users/u", "darwin", "/Users/u/Library/Application Support/sandboxd"},
		{"macOS user without home", nil, 501, "", "darwin", "/var/tmp/sandboxd-state-501"},
		{"windows", map[string]string{"ProgramData": `D:\PD`}, -1, "", "windows", `D:\PD/sandboxd`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := resolve(func(k string) string { return tc.env[k] }, tc.uid, tc.home, tc.goos)
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

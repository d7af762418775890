package launcherlinux

import (
	"slices"
	"testing"
)

func TestSeccompRulesRefuseWhatNeedsTheDaemon(t *testing.T) {
	for _, o := range []SeccompOptions{{Notify: true}, {NotifyConnect: true}, {NotifyLookups: true}, {UnixStream: true}, {NoSetID: true}, {NoUnixSockets: true}} {
		if _, err := SeccompRulesFor(o); err == nil {
			t.Errorf("%+v: rules made without the daemon", o)
		}
	}
}

func TestSeccompRulesFollowOptions(t *testing.T) {
	names := func(r *SeccompRules) []string {
		var n []string
		for _, s := range r.Denied {
			n = append(n, s.Name)
		}
		return n
	}
	plain, err := SeccompRulesFor(SeccompOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if plain.RestrictSockets || slices.Contains(names(plain), "socket") || slices.Contains(names(plain), "shmget") {
		t.Errorf("no options, yet sockets or SysV IPC refused: %+v", plain)
	}
	if len(plain.Denied) != len(deniedCalls()) {
		t.Errorf("%d denied, the table has %d", len(plain.Denied), len(deniedCalls()))
	}
	netns, err := SeccompRulesFor(SeccompOptions{RestrictSocketFamilies: true, NoUnixSockets: true})
	if err != nil {
		t.Fatal(err)
	}
	if !netns.RestrictSockets || !slices.Equal(netns.SocketFamilies, []uint32{afInet, afInet6, afNetlink}) {
		t.Errorf("families %v", netns.SocketFamilies)
	}
	ipc, err := SeccompRulesFor(SeccompOptions{NoSysVIPC: true, NoSockets: true})
	if err != nil {
		t.Fatal(err)
	}
	if n := names(ipc); !slices.Contains(n, "shmget") || !slices.Contains(n, "mq_open") || !slices.Contains(n, "socket") {
		t.Errorf("SysV IPC and sockets not refused: %v", n)
	}
}

package launcherwindows

import (
	"regexp"
	"strings"
	"testing"
)

func TestPipes(t *testing.T) {
	if got, want := MainPipeSDDL("S-1-5-21-1-1001", "S-1-5-21-1-1002"), "D:P(D;;GA;;;S-1-5-21-1-1001)(D;;GA;;;S-1-5-21-1-1002)(A;;GA;;;SY)(A;;GA;;;BA)(A;;GRGW;;;AU)"; got != want {
		t.Errorf("MainPipeSDDL = %s, want %s", got, want)
	}
	if got, want := MainPipeSDDL("", ""), "D:P(A;;GA;;;SY)(A;;GA;;;BA)(A;;GRGW;;;AU)"; got != want {
		t.Errorf("MainPipeSDDL without users = %s, want %s", got, want)
	}
	if got := SessionPipeName("abc"); got != `\\.\pipe\sandboxd-session-abc` {
		t.Errorf("SessionPipeName = %s", got)
	}
	want := "D:P(A;;GA;;;SY)(A;;GA;;;BA)(A;;GRGW;;;S-1-5-21-1-1001)(A;;GRGW;;;" + SessionSID("abc") + ")"
	if got := SessionPipeSDDL("abc", []string{"S-1-5-21-1-1001", ""}); got != want {
		t.Errorf("SessionPipeSDDL = %s, want %s", got, want)
	}
	if SessionPipeSDDL("abc", nil) == SessionPipeSDDL("abd", nil) {
		t.Errorf("two sessions' pipes grant the same SID")
	}
}

func TestDesktop(t *testing.T) {
	users := []string{"S-1-5-21-1-1001", "S-1-5-21-1-1002"}
	if got, want := DesktopSDDL(users), "D:P(A;;GA;;;SY)(A;;0x20087;;;S-1-5-21-1-1001)(A;;0x20087;;;S-1-5-21-1-1002)(A;;0x20087;;;RC)"; got != want {
		t.Errorf("DesktopSDDL = %s, want %s", got, want)
	}
	if got, want := WindowStationSDDL(users), "D:P(A;;GA;;;SY)(A;;0x20023;;;S-1-5-21-1-1001)(A;;0x20023;;;S-1-5-21-1-1002)(A;;0x20023;;;RC)"; got != want {
		t.Errorf("WindowStationSDDL = %s, want %s", got, want)
	}
	// Hooks and journaling (0x8, 0x10, 0x20) would reach other sessions'
	// windows; switching (0x100) the user's input.
	if desktopUse&(0x8|0x10|0x20|0x100) != 0 {
		t.Errorf("desktop rights %#x include hooks, journaling or switching", desktopUse)
	}
	if DesktopName != `sandboxd\default` || !strings.HasPrefix(DesktopName, WindowStationName+`\`) {
		t.Errorf("DesktopName %q", DesktopName)
	}
}

var guidShape = regexp.MustCompile(`^\{[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\}$`)

func TestFirewall(t *testing.T) {
	const sid = "S-1-5-21-1-1001"
	fs := FirewallFilters(sid)
	checkFilters(t, fs, sid)
	for _, f := range fs {
		if !guidShape.MatchString(f.ID) || f.ID[15] != '8' {
			t.Errorf("filter ID %s is not a version 8 GUID", f.ID)
		}
	}
	for _, id := range []string{FirewallProviderID, FirewallSublayerID} {
		if !guidShape.MatchString(id) {
			t.Errorf("%s is not a GUID", id)
		}
	}
	if FirewallFilters("S-1-5-21-2-1001")[0].ID != fs[0].ID {
		t.Errorf("filter IDs depend on the user: installing again would add filters rather than replace them")
	}
}

func TestMasks(t *testing.T) {
	if ModifyAccess != 0x1301BF || WriteAccess != 0xD0156 || UIRestrictionsAll != 0xFF {
		t.Errorf("Modify %#x, write %#x, UI restrictions %#x", ModifyAccess, WriteAccess, UIRestrictionsAll)
	}
	if ModifyAccess&FILE_DELETE_CHILD != 0 {
		t.Errorf("Modify grants FILE_DELETE_CHILD")
	}
	if got := maskString(DELETE|0x200000, maskNames); got != "0x210000 DELETE|0x200000" {
		t.Errorf("maskString = %q", got)
	}
}

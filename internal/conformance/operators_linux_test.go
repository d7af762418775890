package conformance

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestOperatorsOnlyLookAtOthersLayers: a member of the operators group
// lists root's layers and sees which paths they change, but neither reads
// their content (a patch), settles them (commit, discard) nor starts on
// them: a commit writes as root.
func TestOperatorsOnlyLookAtOthersLayers(t *testing.T) {
	if !layersHere() {
		t.Skip("this daemon makes no layers; the refusal has its own cases")
	}
	const operator, socketGroup, operators = 4343, 4242, 4545
	d, err := startDaemonWith(filepath.Join(suite.root, "layers-operators"), suite.wrap, "--socket-group", fmt.Sprint(socketGroup), "--operators-group", fmt.Sprint(operators))
	if err != nil {
		t.Fatal(err)
	}
	defer d.stop()
	as := func(uid int, groups []uint32, dir string, args ...string) cliResult {
		t.Helper()
		return sandboxctlAs(t, credentialOf(uid, groups), d.socket, dir, args...)
	}
	operatorGroups := []uint32{socketGroup, operators}
	f := newFixture(t)
	rootWS := layerWorkspace(t, f)
	r := as(0, nil, rootWS, "run", "--layer", ".", "--json", "--", "/bin/sh", "-c", "echo root > by-root")
	m := regexp.MustCompile(`"session_id":\s*"([0-9a-f]+)"`).FindStringSubmatch(r.stdout)
	if r.code != 0 || m == nil {
		t.Fatalf("root's layered run: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	rootID := m[1]
	defer as(0, nil, rootWS, "discard", rootID)
	if l := as(operator, operatorGroups, "/", "layers"); l.code != 0 || !strings.Contains(l.stdout, rootID) {
		t.Errorf("an operator's layers must list root's: exit %d\n%s%s", l.code, l.stdout, l.stderr)
	}
	if r := as(operator, operatorGroups, "/", "diff", rootID); r.code != 0 || !strings.Contains(r.stdout, "by-root") {
		t.Errorf("an operator's diff of root's layer: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	for _, args := range [][]string{{"diff", "--patch", rootID}, {"commit", rootID}, {"discard", rootID}, {"run", "--layer-from", rootID, "--", "/bin/true"}} {
		if r := as(operator, operatorGroups, "/", args...); r.code == 0 || !strings.Contains(r.stderr, "not yours: the operators group sees every session read-only") {
			t.Errorf("an operator's %v of root's layer: exit %d %q, want refused as read-only", args, r.code, r.stderr)
		}
	}
	if r := as(0, nil, rootWS, "diff", rootID); r.code != 0 || !strings.Contains(r.stdout, "by-root") {
		t.Errorf("root's layer after the operator's tries: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
}

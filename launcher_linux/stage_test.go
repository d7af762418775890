package launcherlinux

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/launcher"
	"github.com/sandboxd/sandboxd/policy"
)

// The init stages the steps of /proc and /dev ahead of its plan from tables
// of its own (cmd/sandboxd-init/mount.c) and uses them only when the plan
// has exactly those steps: tables that drifted from the planner would
// leave every launch building them on its path again, with nothing else
// to show for it.
func TestInitStagesThePlannersSystemSteps(t *testing.T) {
	src, err := os.ReadFile("../cmd/sandboxd-init/mount.c")
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]MountKind{
		"MK_PROC": MountProc, "MK_REBIND_RO": MountRebindReadOnly, "MK_MASK_FILE": MountMaskFile, "MK_TMPFS": MountTmpfs,
		"MK_DEVICE": MountDevice, "MK_DEVPTS": MountDevpts, "MK_SYMLINK": MountSymlink,
	}
	step := regexp.MustCompile(`STEP\((MK_[A-Z_]+), "([^"]*)", "([^"]*)", (0[0-7]*), ([01]), ([01]), "([^"]*)"\)`)
	tables := map[string][]MountStep{}
	for _, name := range []string{"proc_steps", "dev_steps"} {
		start := strings.Index(string(src), "mount_step "+name+"[] = {")
		if start < 0 {
			t.Fatalf("no table %s in mount.c", name)
		}
		body := string(src[start:])
		body = body[:strings.Index(body, "};")]
		matches := step.FindAllStringSubmatch(body, -1)
		if n := strings.Count(body, "STEP("); len(matches) != n || n == 0 {
			t.Fatalf("%s: read %d of its %d steps", name, len(matches), n)
		}
		for _, m := range matches {
			mode, _ := strconv.ParseUint(m[4], 8, 32)
			tables[name] = append(tables[name], MountStep{Kind: kinds[m[1]], Source: m[2], Target: m[3], Mode: uint32(mode), ReadOnly: m[5] == "1", Optional: m[6] == "1", Field: m[7]})
		}
	}
	plan, err := BuildPlan(launcher.PlanRequest{Policy: policy.Normalize(nil), Argv: []string{"sh"}, UID: 1000, GID: 1000}, fakeHost(7, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	for name, table := range tables {
		i := 0
		for i < len(plan.Mounts) && fmt.Sprint(plan.Mounts[i]) != fmt.Sprint(table[0]) {
			i++
		}
		if i+len(table) > len(plan.Mounts) {
			t.Errorf("%s: the plan has no step %+v", name, table[0])
			continue
		}
		for j, want := range table {
			if got := plan.Mounts[i+j]; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s[%d] = %+v, the plan's step is %+v", name, j, want, got)
			}
		}
	}
}

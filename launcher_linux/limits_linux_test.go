package launcherlinux

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/launcher"
)

// limitSpec is testSpec with a session id, as the daemon gives, which names
// the session's cgroup.
func limitSpec(t *testing.T, l *sandboxdv1.Limits, argv ...string) launcher.Spec {
	spec := testSpec(t, &sandboxdv1.Policy{Limits: l}, argv...)
	spec.SessionID = "t" + strings.ReplaceAll(strings.ToLower(t.Name()), "/", "-")
	return spec
}

// sessionCgroupDirs lists the cgroup directories of session id beneath the
// daemon's, in every hierarchy.
func sessionCgroupDirs(t *testing.T, id string) []string {
	t.Helper()
	var dirs []string
	h := detectCgroups()
	for _, c := range limitControllerNames {
		hy := h.ctl[c]
		if hy == nil {
			continue
		}
		m, _ := filepath.Glob(filepath.Join(hy.own, "sandboxd-*", "*", id))
		n, _ := filepath.Glob(filepath.Join(hy.own, "sandboxd-*", id))
		dirs = append(dirs, append(m, n...)...)
	}
	return dirs
}

func needController(t *testing.T, c string) {
	t.Helper()
	h := detectCgroups()
	if h.ctl[c] == nil {
		t.Fatalf("no usable %s controller: %s (run as root, or give the test a delegated cgroup)", c, h.missing[c])
	}
}

func TestPidsLimitContainsAForkBomb(t *testing.T) {
	needController(t, ctlPids)
	bothSets(t, func(t *testing.T, b launcher.Backend, set MechanismSet) {
		var mu sync.Mutex
		var denials []*sandboxdv1.Denial
		spec := limitSpec(t, &sandboxdv1.Limits{Pids: 32}, probeBinary(t), "-test.run=^$")
		spec.Env = append(spec.Env, envForkBomb+"=1")
		spec.OnDenial = func(d *sandboxdv1.Denial) { mu.Lock(); denials = append(denials, d); mu.Unlock() }
		out, serr, p, st, err := runSpec(t, b, spec)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("stdout: %s stderr: %s", out, serr)
		if !strings.Contains(out, "forks refused: EAGAIN") || st.ExitCode != 0 || st.Limit != "" {
			t.Fatalf("the bomb was not contained, or the session did not end normally after it: %+v", st)
		}
		var held int
		fmt.Sscanf(out, "held %d", &held)
		if held > 32 {
			t.Errorf("held %d processes under pids 32", held)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(denials) == 0 || denials[0].GetField() != "limits.pids" || denials[0].GetErrno() != "EAGAIN" {
			t.Errorf("denials %v, want one for limits.pids", denials)
		}
		if !hasField(p.Enforcement(), "limits.pids") {
			t.Errorf("the report says nothing of limits.pids: %v", p.Enforcement().GetFields())
		}
		if dirs := sessionCgroupDirs(t, spec.SessionID); len(dirs) != 0 {
			t.Errorf("cgroups left behind: %v", dirs)
		}
	})
}

func TestMemoryLimitKillsTheSession(t *testing.T) {
	needController(t, ctlMemory)
	bothSets(t, func(t *testing.T, b launcher.Backend, set MechanismSet) {
		var mu sync.Mutex
		var denials []*sandboxdv1.Denial
		// tail keeps the whole line it reads; /dev/zero has no end of line.
		// The sleep beside it must die with it: the session is ended, not
		// just its largest process.
		spec := limitSpec(t, &sandboxdv1.Limits{MemoryBytes: 32 << 20},
			"/bin/sh", "-c", `sleep 30 & head -c 200000000 /dev/zero | tail >/dev/null; echo survived; wait`)
		spec.OnDenial = func(d *sandboxdv1.Denial) { mu.Lock(); denials = append(denials, d); mu.Unlock() }
		start := time.Now()
		out, _, _, st, err := runSpec(t, b, spec)
		if err != nil {
			t.Fatal(err)
		}
		if st.Limit != "limits.memory_bytes" {
			t.Fatalf("status %+v (stdout %q), want ended by limits.memory_bytes", st, out)
		}
		if took := time.Since(start); took > 20*time.Second {
			t.Errorf("took %v: the rest of the session was not killed with the hog", took)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(denials) == 0 || denials[0].GetField() != "limits.memory_bytes" || denials[0].GetOperation() != "oom-kill" {
			t.Errorf("denials %v, want an oom-kill of limits.memory_bytes", denials)
		}
		if dirs := sessionCgroupDirs(t, spec.SessionID); len(dirs) != 0 {
			t.Errorf("cgroups left behind: %v", dirs)
		}
	})
}

// Under the limit the same session runs to its end: the limit is the
// bytes asked for, not less.
func TestMemoryUnderTheLimitRuns(t *testing.T) {
	needController(t, ctlMemory)
	spec := limitSpec(t, &sandboxdv1.Limits{MemoryBytes: 64 << 20},
		"/bin/sh", "-c", `head -c 16000000 /dev/zero | tail | wc -c`)
	out, _, _, st, err := runSpec(t, newBackend(t), spec)
	if err != nil || st.ExitCode != 0 || st.Limit != "" || strings.TrimSpace(out) != "16000000" {
		t.Fatalf("status %+v, %v, out %q", st, err, out)
	}
}

func TestCPULimitThrottles(t *testing.T) {
	needController(t, ctlCPU)
	// A loop with no child processes, so that the shell's own times are
	// all of its CPU. Under a fifth of a CPU its wall time is about five
	// times its CPU time; unlimited, about the same.
	spec := limitSpec(t, &sandboxdv1.Limits{CpuMillis: 200},
		"/bin/sh", "-c", `s=$(date +%s%N); i=0; while [ $i -lt 80000 ]; do i=$((i+1)); done; e=$(date +%s%N); echo $(( (e-s)/1000000 )); times`)
	out, serr, _, st, err := runSpec(t, newBackend(t), spec)
	if err != nil || st.ExitCode != 0 {
		t.Fatalf("status %+v, %v: %s", st, err, serr)
	}
	var wallMS int
	var um, sm int
	var us, ss float64
	if _, err := fmt.Sscanf(out, "%d\n%dm%fs %dm%fs", &wallMS, &um, &us, &sm, &ss); err != nil {
		t.Fatalf("output %q: %v", out, err)
	}
	cpu := float64(um*60+sm*60) + us + ss
	wall := float64(wallMS) / 1000
	t.Logf("loop: %.2f s of CPU in %.2f s of wall time", cpu, wall)
	if cpu < 0.05 {
		t.Fatalf("the loop took too little CPU (%.3f s) to judge", cpu)
	}
	if cpu/wall > 0.45 {
		t.Errorf("the loop had %.0f%% of a CPU under a 20%% quota", 100*cpu/wall)
	}
}

func TestChildSessionIsWithinItsParentsCgroup(t *testing.T) {
	needController(t, ctlPids)
	b := newBackend(t)
	parent := limitSpec(t, &sandboxdv1.Limits{Pids: 32}, "/bin/sleep", "30")
	p, err := b.Start(t.Context(), parent)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { p.Kill(); p.Wait() }()
	if !detectCgroups().ctl[ctlPids].v2 {
		// On v1 only the command is inside: the init's threads must count
		// against nothing, or a command that used the pids up would leave
		// the init unable to start one.
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", p.Pid()))
		if err != nil || strings.Contains(string(b), parent.SessionID) {
			t.Errorf("the init is in the session's cgroup (%v):\n%s", err, b)
		}
	}
	child := limitSpec(t, nil, "/bin/sh", "-c", "cat /proc/self/cgroup")
	child.SessionID = parent.SessionID + "-child"
	child.ParentSessionID = parent.SessionID
	child.ParentMechanismSet = p.Enforcement().GetMechanismSet()
	out, _, _, st, err := runSpec(t, b, child)
	if err != nil || st.ExitCode != 0 {
		t.Fatalf("child: %+v %v", st, err)
	}
	if !strings.Contains(out, parent.SessionID+"/"+child.SessionID+"/") {
		t.Errorf("the child's cgroups are not beneath its parent's:\n%s", out)
	}
}

// The proxy listener is in the sandbox's own network: the sandbox reaches
// it at ProxyAddress, and what the daemon accepts there is the sandbox's.
func TestAllowlistProxyListenerIsTheSandboxs(t *testing.T) {
	served := make(chan string, 1)
	spec := testSpec(t, &sandboxdv1.Policy{Network: &sandboxdv1.Network{
		Mode: sandboxdv1.Network_ALLOWLIST, Allow: []*sandboxdv1.NetworkAllow{{Host: "example.org", Port: 443}},
	}}, "/bin/bash", "-c", `exec 3<>/dev/tcp/127.0.0.1/3128 2>/dev/null || { echo "no route"; exit 3; }; echo hello >&3; read -r line <&3; echo "$line"`)
	spec.Proxy = func(l net.Listener) {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			line, _ := bufio.NewReader(c).ReadString('\n')
			served <- line
			io.WriteString(c, "from the daemon\n")
			c.Close()
		}
	}
	if _, err := os.Stat("/bin/bash"); err != nil {
		t.Fatal("/bin/bash is needed for /dev/tcp")
	}
	out, serr, p, st, err := runSpec(t, newBackend(t), spec)
	if err != nil || st.ExitCode != 0 {
		t.Fatalf("status %+v %v: %s %s", st, err, out, serr)
	}
	if strings.TrimSpace(out) != "from the daemon" || strings.TrimSpace(<-served) != "hello" {
		t.Errorf("stdout %q", out)
	}
	if !hasField(p.Enforcement(), "network.allow") {
		t.Errorf("the report says nothing of network.allow")
	}
	spec.Proxy = nil
	p, err = newBackend(t).Start(t.Context(), spec)
	wantRefusal(t, p, err, "network.allow")
	p, err = landlockBackend(t).Start(t.Context(), spec)
	wantRefusal(t, p, err, "network.mode")
}

func hasField(r *sandboxdv1.EnforcementReport, field string) bool {
	for _, f := range r.GetFields() {
		if f.GetField() == field && f.GetMechanism() != "" {
			return true
		}
	}
	return false
}

// envForkBomb makes the test binary a fork bomb that stops at its first
// refused fork, or at a bound of its own should nothing refuse.
const envForkBomb = "SANDBOXD_TEST_FORK_BOMB"

func forkBomb() {
	var procs []*os.Process
	var ferr error
	for len(procs) < 500 {
		p, err := os.StartProcess("/bin/sleep", []string{"sleep", "30"}, &os.ProcAttr{})
		if err != nil {
			ferr = err
			break
		}
		procs = append(procs, p)
	}
	fmt.Printf("held %d\n", len(procs))
	if errors.Is(ferr, syscall.EAGAIN) {
		fmt.Println("forks refused: EAGAIN")
	} else {
		fmt.Printf("forks refused: %v\n", ferr)
	}
	for _, p := range procs {
		p.Kill()
		p.Wait()
	}
	os.Exit(0)
}

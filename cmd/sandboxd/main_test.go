package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/internal/initbuild"
	"github.com/sandboxd/sandboxd/selftest"
)

// sysmonChild makes TestMain run keepSysmonAwake and print its pid,
// GODEBUG and what the daemon would log of it; set to sysmonAfterALine,
// only once it has read a line or the end of its input.
const (
	sysmonChild      = "SANDBOXD_TEST_SYSMON_CHILD"
	sysmonAfterALine = "after-a-line"
)

func TestMain(m *testing.M) {
	// --self-test starts sandboxes whose init and probe are this binary.
	runInitIfRequested()
	selftest.RunProbeIfRequested()
	if mode := os.Getenv(sysmonChild); mode != "" {
		if mode == sysmonAfterALine {
			// The parent does to the binary what it means to first.
			bufio.NewReader(os.Stdin).ReadString('\n')
		}
		keepSysmonAwake()
		comm, _ := os.ReadFile("/proc/self/comm")
		fmt.Println(os.Getpid(), strings.TrimSpace(string(comm)), os.Getenv("GODEBUG"))
		warnSysmonAsleep(log.New(os.Stdout, "sandboxd: ", 0))
		os.Exit(0)
	}
	code := m.Run()
	initbuild.RemoveShared()
	os.Exit(code)
}

func TestBadFlagsExit2(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"--sandbox-uid", "0"}, "--sandbox-uid 0: must be an unprivileged id"},
		{[]string{"--sandbox-gid", "0"}, "--sandbox-gid 0: must be an unprivileged id"},
		{[]string{"--sandbox-uid", "4294967296"}, "must be an unprivileged id"},
		{[]string{"--no-such-flag"}, "flag provided but not defined"},
		{[]string{"extra"}, "unexpected arguments"},
		{[]string{"--mechanism", "bogus"}, `--mechanism: `},
	} {
		var stderr bytes.Buffer
		if code := run(context.Background(), tc.args, io.Discard, &stderr); code != 2 || !strings.Contains(stderr.String(), tc.stderr) {
			t.Errorf("run(%q) = %d, stderr %q; want 2 and %q", tc.args, code, stderr.String(), tc.stderr)
		}
	}
}

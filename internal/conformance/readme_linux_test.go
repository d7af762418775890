package conformance

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// quickstartPrelude stands in for the person at the terminal: the
// commands that run until interrupted, or read a terminal, are given two
// seconds and then interrupted, as the README says to.
const quickstartPrelude = `sandboxctl() {
	local rc
	case " $* " in
	*" --detach "*)
		command sandboxctl "$@"
		return;;
	*" attach "*|*" --tty "*)
		# A terminal that types nothing: its end of input would end
		# the shell on the other side.
		timeout -s INT -k 1 2 "$(type -P sandboxctl)" "$@" < <(sleep 30);;
	*" top "*|*" events "*|*" logs "*)
		timeout -s INT -k 1 2 "$(type -P sandboxctl)" "$@" </dev/null;;
	*)
		command sandboxctl "$@"
		return;;
	esac
	rc=$?
	# Interrupted, as the README says to end it (ctrl-c), or killed.
	case $rc in 124|130|137) rc=0;; esac
	return $rc
}
trap 'echo "@@fail $LINENO $?" >&2' ERR
`

// failsBecause are what a quickstart comment says when its line must
// fail; each must also show in the output.
var failsBecause = []string{"Read-only file system", "Permission denied", "exit 125"}

var failLine = regexp.MustCompile(`@@fail (\d+) (\d+)`)

// TestReadmeQuickstart runs the README's Quickstart shell blocks (up to
// the next section) as they are written, against the suite's daemon: every line succeeds unless its
// comment says it fails, and then the output says why. Only /var/tmp is
// moved, into a directory of the test's own.
func TestReadmeQuickstart(t *testing.T) {
	if !linuxHost.namespaces || suite.mechanism != "" || len(suite.wrap) > 0 {
		t.Skip("the quickstart shows the namespaces set, which this pass does not run (forced mechanism set or simulated degraded host)")
	}
	path := os.Getenv("SANDBOXD_CONFORMANCE_README")
	if path == "" {
		path = filepath.Join(repoRoot(t), "README.md")
	}
	readme, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	start := strings.Index(text, "\n## Quickstart\n")
	if start < 0 {
		t.Fatal("README has no Quickstart section")
	}
	end := strings.Index(text[start+1:], "\n## ")
	if end < 0 {
		t.Fatal("README's Quickstart is its last section")
	}
	end += start + 1
	blocks := regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(text[start:end], -1)
	if len(blocks) < 3 {
		t.Fatalf("the quickstart has %d shell blocks", len(blocks))
	}
	root := filepath.Join(suite.root, "readme")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Dir(suite.sandboxctl)
	var script strings.Builder
	script.WriteString(quickstartPrelude)
	prelude := strings.Count(quickstartPrelude, "\n")
	var lines []string
	for _, b := range blocks {
		lines = append(lines, strings.Split(strings.ReplaceAll(b[1], "/var/tmp/", root+"/"), "\n")...)
	}
	for _, l := range lines {
		script.WriteString(strings.Replace(l, "export PATH=$PWD/bin:$PATH", "export PATH="+bin+":$PATH", 1) + "\n")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script.String())
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "SANDBOXD_SOCKET="+suite.daemon.socket)
	// npm install --prefix reads no global npmrc, where this machine
	// names its CA file: it is passed on as the environment's setting.
	if out, err := exec.Command("npm", "config", "get", "cafile").Output(); err == nil {
		if ca := strings.TrimSpace(string(out)); ca != "" && ca != "null" && ca != "undefined" {
			cmd.Env = append(cmd.Env, "npm_config_cafile="+ca)
		}
	}
	// A background process the script left would hold the output open.
	cmd.WaitDelay = 10 * time.Second
	out, _ := cmd.CombinedOutput()
	failed := map[int]bool{}
	for _, m := range failLine.FindAllStringSubmatch(string(out), -1) {
		var n int
		fmt.Sscan(m[1], &n)
		failed[n-prelude-1] = true
	}
	quoted := false
	for i, l := range lines {
		// A line inside a quoted argument (a script of its own) is
		// not a statement of the block: its outcome is the script's.
		inside := quoted
		quoted = quoted != (strings.Count(l, "'")%2 == 1)
		if inside {
			continue
		}
		comment := ""
		if j := strings.Index(l, "# "); j >= 0 {
			comment = l[j:]
		}
		var because string
		for _, f := range failsBecause {
			if strings.Contains(comment, f) {
				because = f
			}
		}
		switch {
		case failed[i] && because == "" && !strings.Contains(comment, "same:"):
			t.Errorf("quickstart line failed: %s\n%s", l, out)
		case !failed[i] && because != "" && !quoted:
			t.Errorf("quickstart line must fail (%s), but succeeded: %s\n%s", because, l, out)
		case because != "" && !strings.Contains(string(out), strings.TrimPrefix(because, "exit ")):
			t.Errorf("the output does not say %q for: %s\n%s", because, l, out)
		}
	}
	t.Logf("quickstart output:\n%s", out)
}

// repoRoot is the repository the test runs in, two levels above this
// package (SANDBOXD_CONFORMANCE_README names the README where the suite
// runs elsewhere).
func repoRoot(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(filepath.Dir(wd))
}

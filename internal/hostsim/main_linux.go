//go:build linux

package hostsim

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Main is the hostsim command: it parses args (without the program name),
// installs the filter and replaces the process with the command. It returns
// only on failure, with the exit status: 2 for bad usage, 127 when the
// command is not found, 1 otherwise.
func Main(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("hostsim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	deny := fs.String("deny", "", "comma-separated operations to make fail: "+strings.Join(Names(), ", "))
	errnoName := fs.String("errno", "EPERM", "errno the denied operations fail with, by name or number")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: hostsim --deny LIST [--errno EPERM] -- command [args...]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "hostsim: "+format+"\n", a...)
		fs.Usage()
		return 2
	}

	var names []string
	for n := range strings.SplitSeq(*deny, ",") {
		if n = strings.TrimSpace(n); n != "" {
			names = append(names, n)
		}
	}
	// An empty list would run the command on an intact host, which a test
	// author asking for a degraded one did not mean.
	if len(names) == 0 {
		return usageErr("--deny needs at least one of: %s", strings.Join(Names(), ", "))
	}
	errno, err := ParseErrno(*errnoName)
	if err != nil {
		return usageErr("--errno: %v", err)
	}
	prog, err := Program(names, errno)
	if err != nil {
		return usageErr("--deny: %v", err)
	}
	cmd := fs.Args()
	if len(cmd) == 0 {
		return usageErr("no command given")
	}

	// Look the command up before the filter is in place, so a missing
	// command is reported as such and not as a side effect of the filter.
	path, err := exec.LookPath(cmd[0])
	if err != nil {
		fmt.Fprintf(stderr, "hostsim: %v\n", err)
		return 127
	}
	if err := Install(prog); err != nil {
		fmt.Fprintf(stderr, "hostsim: %v\n", err)
		return 1
	}
	err = unix.Exec(path, cmd, os.Environ())
	fmt.Fprintf(stderr, "hostsim: exec %s: %v\n", path, err)
	if errors.Is(err, syscall.ENOENT) {
		return 127
	}
	return 1
}

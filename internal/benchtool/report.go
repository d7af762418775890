//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"

	"github.com/sandboxd/sandboxd/api/client"
)

// bench is one invocation: its configuration, the daemon it measures and
// what it has found so far.
type bench struct {
	cfg    *config
	ctx    context.Context
	cl     *client.Client
	socket string

	// bigList is a second connection that accepts List answers larger
	// than gRPC's default 4 MiB, opened the first time the client's List
	// is refused for size; listTooBig keeps that refusal for the report.
	bigListMu  sync.Mutex
	bigList    *grpc.ClientConn
	listTooBig string

	rows  []row
	repro []string
	notes []string
}

// row is one line of the table.
type row struct {
	figure      string
	value       string // sandboxd
	counterpart string // bwrap or raw, same run
	ratio       string // value / counterpart
	target      string
	verdict     string // PASS, MISS, ERROR, "" when there is no target
}

func (b *bench) add(r row) { b.rows = append(b.rows, r) }

// reproduce records command lines, one per entry, under a heading.
func (b *bench) reproduce(heading string, lines ...string) {
	b.repro = append(b.repro, heading)
	for _, l := range lines {
		b.repro = append(b.repro, "    "+l)
	}
}

func (b *bench) note(format string, args ...any) {
	b.notes = append(b.notes, fmt.Sprintf(format, args...))
}

func (b *bench) print(w io.Writer) {
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "FIGURE\tSANDBOXD\tCOUNTERPART (same run)\tRATIO\tTARGET\tRESULT")
	for _, r := range b.rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.figure, dash(r.value), dash(r.counterpart), dash(r.ratio), dash(r.target), dash(r.verdict))
	}
	tw.Flush()
	if len(b.notes) > 0 {
		fmt.Fprintln(w, "\nNotes:")
		for _, n := range b.notes {
			fmt.Fprintf(w, "  - %s\n", n)
		}
	}
	if len(b.repro) > 0 {
		fmt.Fprintln(w, "\nTo reproduce (the counterparts run with the workspace as the current directory):")
		for _, l := range b.repro {
			fmt.Fprintln(w, "  "+l)
		}
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// benchtoolLine is the invocation that reruns one figure against the same
// daemon; extra are its size flags.
func (b *bench) benchtoolLine(figure string, extra ...string) string {
	args := []string{"go", "run", "./internal/benchtool", "--socket", b.socket, "--workspace", b.cfg.workspace}
	if figure == "sandboxctl" || figure == "help" {
		args = append(args, "--sandboxctl", b.cfg.sandboxctl)
	}
	if figure == "help" && b.cfg.goFloor != "" {
		args = append(args, "--go-floor", b.cfg.goFloor)
	}
	args = append(args, "--only", figure)
	return shellJoin(append(args, extra...))
}

// bwrapArgv is the bubblewrap counterpart running argv: the same
// isolation a workspace-write, network-NONE session gets, give or take.
func (b *bench) bwrapArgv(argv ...string) []string {
	ws := b.cfg.workspace
	return append([]string{b.cfg.bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
		"--unshare-all", "--die-with-parent", "--new-session", "--bind", ws, ws}, argv...)
}

func shellJoin(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = shellQuote(a)
	}
	return strings.Join(q, " ")
}

func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d)/float64(time.Millisecond)) }

// ratio formats a/b; both are in the same unit.
func ratio(a, b float64) string {
	if b == 0 {
		return ""
	}
	return fmt.Sprintf("%.2fx", a/b)
}

func verdict(ok bool) string {
	if ok {
		return "PASS"
	}
	return "MISS"
}

func numCPU() int { return runtime.NumCPU() }

func kernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "kernel unknown"
	}
	return "Linux " + unix.ByteSliceToString(u.Release[:])
}

// warnf reports progress that is not part of the table.
func warnf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "benchtool: "+format+"\n", args...)
}

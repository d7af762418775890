package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sandboxd/sandboxd/api/client"
	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

const psUsage = `usage: sandboxctl ps [-a] [-q | --json] [--tree]

Lists the live sessions, with -a the ended ones the daemon still keeps
too: ID STATE PID AGE DENIALS VIEWERS PARENT COMMAND. STATE is
starting, running, waiting-for-input (every process blocked, one reading
its terminal or stdin and none waiting on anything else), waiting (blocked
on a timer due soon or a local peer), waiting-for-network (blocked on a
connection or an unanswered request), exited, failed-to-start or killed. DENIALS counts the operations
the sandbox refused (sandboxctl inspect shows the latest). VIEWERS counts the
clients attached to the session's output now, the one that started it
included, and says "(detached)" for a session started with run --detach,
which no client keeps alive. PARENT is the session whose sandbox started
this one, empty for a session started from outside any sandbox. --json
prints a JSON array of the sessions, each as inspect prints one.

flags:
`

func psVerb(ctx context.Context, c *cli, args []string) int {
	fs := flag.NewFlagSet("sandboxctl ps", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	all := fs.Bool("a", false, "list ended sessions too")
	quiet := fs.Bool("q", false, "print session ids only")
	asJSON := fs.Bool("json", false, "print the sessions as a JSON array")
	tree := fs.Bool("tree", false, "show child sessions under their parents, each level in the order they were created")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), psUsage)
		fs.PrintDefaults()
	}
	if _, code, ok := c.parseVerb(fs, args, 0); !ok {
		return code
	}
	if *quiet && *asJSON {
		c.usageError(fs.Name(), "-q and --json: choose one")
		return exitUsage
	}
	var sessions []*sandboxdv1.SessionInfo
	if code := c.withClient(ctx, func(cl *client.Client) (err error) {
		sessions, err = cl.List(ctx)
		return err
	}); code != 0 {
		return code
	}
	if !*all {
		sessions = live(sessions)
	}
	if *asJSON {
		out, err := sessionsJSON(psRows(sessions, *tree))
		if err != nil {
			fmt.Fprintf(c.stderr, "sandboxctl: encoding sessions: %v\n", err)
			return exitFailed
		}
		fmt.Fprintf(c.stdout, "%s\n", out)
		return 0
	}
	if *quiet {
		for _, r := range psRows(sessions, *tree) {
			fmt.Fprintln(c.stdout, r.s.GetId())
		}
		return 0
	}
	if err := writePS(c.stdout, sessions, *tree, time.Now()); err != nil {
		fmt.Fprintf(c.stderr, "sandboxctl: %v\n", err)
		return exitFailed
	}
	return 0
}

// live leaves out the sessions that have ended.
func live(sessions []*sandboxdv1.SessionInfo) []*sandboxdv1.SessionInfo {
	var out []*sandboxdv1.SessionInfo
	for _, s := range sessions {
		switch s.GetState() {
		case sandboxdv1.State_EXITED, sandboxdv1.State_FAILED_TO_START, sandboxdv1.State_KILLED:
		default:
			out = append(out, s)
		}
	}
	return out
}

// sessionsJSON is the rows' sessions, in their order, as a JSON array of
// what inspect prints for each.
func sessionsJSON(rows []psRow) ([]byte, error) {
	list := make([]json.RawMessage, 0, len(rows))
	for _, r := range rows {
		b, err := inspectJSON(r.s)
		if err != nil {
			return nil, fmt.Errorf("session %s: %w", r.s.GetId(), err)
		}
		list = append(list, b)
	}
	return json.MarshalIndent(list, "", "  ")
}

func psRows(sessions []*sandboxdv1.SessionInfo, tree bool) []psRow {
	if tree {
		return treeRows(sessions)
	}
	rows := make([]psRow, 0, len(sessions))
	for _, s := range sessions {
		rows = append(rows, psRow{s: s})
	}
	return rows
}

// writePS writes the ps table.
func writePS(w io.Writer, sessions []*sandboxdv1.SessionInfo, tree bool, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tPID\tAGE\tDENIALS\tVIEWERS\tPARENT\tCOMMAND")
	for _, r := range psRows(sessions, tree) {
		s := r.s
		fmt.Fprintf(tw, "%s%s\t%s\t%d\t%s\t%d\t%s\t%s\t%s\n", r.branch, s.GetId(), client.StateName(s.GetState()), s.GetPid(), age(s, now),
			s.GetDenialCount(), viewers(s), s.GetParentId(), command(s.GetArgv()))
	}
	return tw.Flush()
}

// psRow is one line of ps: a session and, with --tree, the branch drawn in
// front of its id.
type psRow struct {
	s      *sandboxdv1.SessionInfo
	branch string
}

// treeRows orders sessions depth first, each child under its parent and
// siblings (roots too) in the order they were created. A session whose
// parent is not in the list is a root, so a sandbox that sees only its own
// subtree gets a tree rather than nothing.
func treeRows(sessions []*sandboxdv1.SessionInfo) []psRow {
	listed := make(map[string]bool, len(sessions))
	for _, s := range sessions {
		listed[s.GetId()] = true
	}
	children := map[string][]*sandboxdv1.SessionInfo{}
	var roots []*sandboxdv1.SessionInfo
	for _, s := range sessions {
		if p := s.GetParentId(); p != "" && p != s.GetId() && listed[p] {
			children[p] = append(children[p], s)
		} else {
			roots = append(roots, s)
		}
	}
	byCreation := func(l []*sandboxdv1.SessionInfo) {
		sort.SliceStable(l, func(i, j int) bool {
			return l[i].GetCreated().AsTime().Before(l[j].GetCreated().AsTime())
		})
	}
	byCreation(roots)
	rows := make([]psRow, 0, len(sessions))
	seen := make(map[string]bool, len(sessions))
	var walk func(s *sandboxdv1.SessionInfo, branch, indent string)
	walk = func(s *sandboxdv1.SessionInfo, branch, indent string) {
		if seen[s.GetId()] {
			return
		}
		seen[s.GetId()] = true
		rows = append(rows, psRow{s: s, branch: branch})
		kids := children[s.GetId()]
		byCreation(kids)
		for i, k := range kids {
			if i == len(kids)-1 {
				walk(k, indent+"└─ ", indent+"   ")
			} else {
				walk(k, indent+"├─ ", indent+"│  ")
			}
		}
	}
	for _, s := range roots {
		walk(s, "", "")
	}
	// Parents that name each other in a loop leave no root to start from;
	// the daemon should never report that, but every session still shows.
	for _, s := range sessions {
		walk(s, "", "")
	}
	return rows
}

// viewers is the VIEWERS cell: how many clients watch, and whether the
// session lives on without any.
func viewers(s *sandboxdv1.SessionInfo) string {
	if s.GetDetached() {
		return fmt.Sprintf("%d (detached)", s.GetViewers())
	}
	return fmt.Sprint(s.GetViewers())
}

func age(s *sandboxdv1.SessionInfo, now time.Time) string {
	if s.GetCreated() == nil {
		return "-"
	}
	d := now.Sub(s.GetCreated().AsTime())
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	default:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	}
}

// command shortens argv to one table cell.
func command(argv []string) string {
	const max = 60
	s := strings.Join(argv, " ")
	if r := []rune(s); len(r) > max {
		return string(r[:max-3]) + "..."
	}
	return s
}

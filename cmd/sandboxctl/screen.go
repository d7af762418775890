package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strings"

	"github.com/sandboxd/sandboxd/api/client"
	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

const screenUsage = `usage: sandboxctl screen [--json] ID

Prints what the terminal of session ID shows now, as text, without
attaching: the daemon follows every PTY session's output on a virtual
screen. --json prints the rows with the cursor (row and column from 0,
visible or not), the size, whether the program is on the alternate screen,
and the title. A session without a terminal has no screen (exit 1).

flags:
`

// screenJSON is the form --json prints.
type screenJSON struct {
	Rows          uint32    `json:"rows"`
	Cols          uint32    `json:"cols"`
	Cursor        [2]uint32 `json:"cursor"`
	CursorVisible bool      `json:"cursor_visible"`
	AltScreen     bool      `json:"alt_screen"`
	Title         string    `json:"title"`
	Lines         []string  `json:"lines"`
}

func screenVerb(ctx context.Context, c *cli, args []string) int {
	fs := flag.NewFlagSet("sandboxctl screen", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	asJSON := fs.Bool("json", false, "print JSON: lines, cursor [row, col], size")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), screenUsage)
		fs.PrintDefaults()
	}
	pos, code, ok := c.parseVerb(fs, args, 1)
	if !ok {
		return code
	}
	var scr *sandboxdv1.Screen
	if code := c.withClient(ctx, func(cl *client.Client) (err error) {
		scr, err = cl.Screen(ctx, pos[0])
		return err
	}); code != 0 {
		return code
	}
	if scr == nil {
		fmt.Fprintf(c.stderr, "sandboxctl: session %s has no terminal, so no screen (logs prints its output)\n", pos[0])
		return exitFailed
	}
	if !*asJSON {
		lines := scr.GetLines()
		for len(lines) > 0 && lines[len(lines)-1] == "" {
			lines = lines[:len(lines)-1]
		}
		if len(lines) > 0 {
			fmt.Fprintln(c.stdout, strings.Join(lines, "\n"))
		}
		return 0
	}
	out, err := json.MarshalIndent(screenJSON{
		Rows: scr.GetRows(), Cols: scr.GetCols(), Cursor: [2]uint32{scr.GetCursorRow(), scr.GetCursorCol()},
		CursorVisible: scr.GetCursorVisible(), AltScreen: scr.GetAltScreen(), Title: scr.GetTitle(), Lines: scr.GetLines(),
	}, "", "  ")
	if err != nil {
		fmt.Fprintf(c.stderr, "sandboxctl: encoding screen of %s: %v\n", pos[0], err)
		return exitFailed
	}
	fmt.Fprintf(c.stdout, "%s\n", out)
	return 0
}

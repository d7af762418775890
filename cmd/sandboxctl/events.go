package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/sandboxd/sandboxd/api/client"
	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

const eventsUsage = `usage: sandboxctl events [--session ID [--until-end]] [--json] [--no-states] [--no-denials]

Follows session events until interrupted: first the state of every live
session (marked "snapshot"), then each state change (starting, running,
waiting-for-input, waiting, waiting-for-network, exited, failed-to-start,
killed) and each operation a sandbox refused, as they happen. Every line
names the session and its parent, so a subtree can be followed. With --json, one JSON object per line.

flags:
`

// errSessionEnded stops the watch of --until-end.
var errSessionEnded = errors.New("session ended")

func eventsVerb(ctx context.Context, c *cli, args []string) int {
	fs := flag.NewFlagSet("sandboxctl events", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	session := fs.String("session", "", "only this session and the sessions started from inside it")
	untilEnd := fs.Bool("until-end", false, "with --session: stop once that session has ended")
	asJSON := fs.Bool("json", false, "print each event as one JSON object")
	noStates := fs.Bool("no-states", false, "leave out state changes")
	noDenials := fs.Bool("no-denials", false, "leave out denials")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), eventsUsage)
		fs.PrintDefaults()
	}
	if _, code, ok := c.parseVerb(fs, args, 0); !ok {
		return code
	}
	if *untilEnd && *session == "" {
		c.usageError(fs.Name(), "--until-end needs --session")
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	req := &sandboxdv1.WatchRequest{SessionId: *session, NoStates: *noStates, NoDenials: *noDenials}
	enc := json.NewEncoder(c.stdout)
	code := c.withClient(ctx, func(cl *client.Client) error {
		err := cl.Watch(ctx, req, func(ev *sandboxdv1.Event) error {
			var err error
			if *asJSON {
				err = enc.Encode(client.Record(ev))
			} else {
				err = writeEvent(c.stdout, ev)
			}
			if err != nil {
				return err
			}
			if *untilEnd && ev.GetSessionId() == *session && ended(ev) {
				return errSessionEnded
			}
			return nil
		})
		if errors.Is(err, errSessionEnded) {
			return nil
		}
		return err
	})
	return code
}

// ended says whether ev shows its session in a final state.
func ended(ev *sandboxdv1.Event) bool {
	switch ev.GetState().GetTo() {
	case sandboxdv1.State_EXITED, sandboxdv1.State_FAILED_TO_START, sandboxdv1.State_KILLED:
		return true
	}
	return false
}

// writeEvent prints one event for a human:
//
//	TIME SESSION [parent P] state FROM -> TO [reason ...]
//	TIME SESSION [parent P] denied FIELD OPERATION TARGET [by COMMAND[PID]] (ERRNO)[: DETAIL]
func writeEvent(w io.Writer, ev *sandboxdv1.Event) error {
	var b strings.Builder
	b.WriteString(ev.GetTime().AsTime().Local().Format("15:04:05.000"))
	b.WriteString(" " + ev.GetSessionId())
	if p := ev.GetParentId(); p != "" {
		b.WriteString(" parent=" + p)
	}
	switch {
	case ev.GetState() != nil:
		st := ev.GetState()
		if ev.GetSnapshot() {
			fmt.Fprintf(&b, " state %s (snapshot)", client.StateName(st.GetTo()))
		} else if st.GetFrom() == sandboxdv1.State_STATE_UNSPECIFIED {
			fmt.Fprintf(&b, " state %s", client.StateName(st.GetTo()))
		} else {
			fmt.Fprintf(&b, " state %s -> %s", client.StateName(st.GetFrom()), client.StateName(st.GetTo()))
		}
		switch st.GetTo() {
		case sandboxdv1.State_EXITED, sandboxdv1.State_FAILED_TO_START:
			fmt.Fprintf(&b, " code=%d", st.GetExitCode())
		}
		if sig := st.GetSignal(); sig != 0 {
			fmt.Fprintf(&b, " signal=%d", sig)
		}
		if r := st.GetReason(); r != "" {
			fmt.Fprintf(&b, " reason=%q", r)
		}
		if argv := ev.GetArgv(); len(argv) > 0 {
			fmt.Fprintf(&b, " command=%q", command(argv))
		}
	case ev.GetDenial() != nil:
		d := ev.GetDenial()
		fmt.Fprintf(&b, " denied %s %s", d.GetField(), d.GetOperation())
		if t := d.GetTarget(); t != "" {
			b.WriteString(" " + t)
		}
		// The daemon's own refusals (its proxy, limits) have no process.
		if d.GetCommand() != "" || d.GetPid() != 0 {
			fmt.Fprintf(&b, " by %s[%d]", d.GetCommand(), d.GetPid())
		}
		if e := d.GetErrno(); e != "" {
			fmt.Fprintf(&b, " (%s)", e)
		}
		if why := d.GetDetail(); why != "" {
			fmt.Fprintf(&b, ": %s", why)
		}
		if ev.GetSnapshot() {
			b.WriteString(" (snapshot)")
		}
	}
	b.WriteByte('\n')
	_, err := io.WriteString(w, b.String())
	return err
}

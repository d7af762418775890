// Command operator shows the operator's calls: with no argument it lists
// the sessions the caller may see (root, the daemon's user and members of
// sandboxd --operators-group see all), live ones first; with a session ID
// it inspects that session: its command, the policy and its digest, what
// enforces each field on this host, and its latest denials.
//
//	go run ./examples/operator
//	go run ./examples/operator 2346b5632b90ac7e
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/sandboxd/sandboxd/api/client"
	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

func main() {
	socket := flag.String("socket", "", "daemon socket (default: $SANDBOXD_SOCKET, else the daemon's default)")
	flag.Parse()
	if flag.NArg() > 1 {
		fmt.Fprintln(os.Stderr, "usage: operator [ID]")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := client.Dial(ctx, *socket)
	if err != nil {
		fmt.Fprintf(os.Stderr, "operator: %v\n", err)
		os.Exit(1)
	}
	defer cl.Close()
	if flag.NArg() == 0 {
		err = list(ctx, cl)
	} else {
		err = inspect(ctx, cl, flag.Arg(0))
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "operator: %v\n", err)
		os.Exit(1)
	}
}

func list(ctx context.Context, cl *client.Client) error {
	sessions, err := cl.List(ctx)
	if err != nil {
		return err
	}
	sort.SliceStable(sessions, func(i, j int) bool { return live(sessions[i]) && !live(sessions[j]) })
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tOWNER\tDENIALS\tSTARTED\tCOMMAND")
	for _, s := range sessions {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\n", s.GetId(), client.StateName(s.GetState()), s.GetOwnerUid(),
			s.GetDenialCount(), s.GetCreated().AsTime().Local().Format(time.TimeOnly), strings.Join(s.GetArgv(), " "))
	}
	return tw.Flush()
}

func live(s *sandboxdv1.SessionInfo) bool {
	switch s.GetState() {
	case sandboxdv1.State_EXITED, sandboxdv1.State_FAILED_TO_START, sandboxdv1.State_KILLED:
		return false
	}
	return true
}

func inspect(ctx context.Context, cl *client.Client, id string) error {
	s, err := cl.Inspect(ctx, id)
	if status.Code(err) == codes.NotFound {
		// Sessions of other users do not exist for a caller who may not
		// see them: not found, never permission denied.
		return fmt.Errorf("no session %s that you may see", id)
	}
	if err != nil {
		return err
	}
	fmt.Printf("session %s: %s, owner uid %d\n", s.GetId(), client.StateName(s.GetState()), s.GetOwnerUid())
	fmt.Printf("command: %s (in %s)\n", strings.Join(s.GetArgv(), " "), s.GetCwd())
	if !live(s) {
		fmt.Printf("ended: exit code %d, signal %d", s.GetExitCode(), s.GetSignal())
		if r := s.GetReason(); r != "" {
			fmt.Printf(", %s", r)
		}
		fmt.Println()
	}
	pol, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(s.GetPolicy())
	if err != nil {
		return fmt.Errorf("encoding the policy of %s: %w", id, err)
	}
	fmt.Printf("policy %s: %s\n", s.GetPolicyDigest(), pol)
	fmt.Println("enforced by:")
	for _, f := range s.GetEnforcement().GetFields() {
		fmt.Printf("  %s: %s\n", f.GetField(), f.GetMechanism())
	}
	fmt.Printf("denials: %d, the latest:\n", s.GetDenialCount())
	for _, d := range s.GetRecentDenials() {
		fmt.Printf("  %s %s %s %s by %s[%d] (%s)\n", d.GetTime().AsTime().Local().Format(time.TimeOnly), d.GetField(),
			d.GetOperation(), d.GetTarget(), d.GetCommand(), d.GetPid(), d.GetErrno())
	}
	return nil
}

package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sandboxd/sandboxd/api/client"
	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// A program runs one command in a sandbox that may write only its
// workspace, with no network and a time limit, streams the command's
// output as it comes, and exits as the command did. A policy the daemon
// cannot enforce on its host is refused with the field, the missing
// mechanism and a remedy, never run with less. (Without a daemon to talk
// to this example is compiled, not run.)
func Example() {
	ctx := context.Background()
	cl, err := client.Dial(ctx, "") // $SANDBOXD_SOCKET, else the default socket
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()

	res, err := cl.Run(ctx, client.RunOptions{
		Start: &sandboxdv1.Start{
			Policy: &sandboxdv1.Policy{
				Filesystem: &sandboxdv1.Filesystem{Write: []string{"/var/tmp/work"}},
				Network:    &sandboxdv1.Network{Mode: sandboxdv1.Network_NONE},
				Limits:     &sandboxdv1.Limits{Timeout: durationpb.New(5 * time.Minute)},
			},
			Command: &sandboxdv1.Command{Argv: []string{"make", "test"}, Cwd: "/var/tmp/work"},
		},
		Stdout: os.Stdout,
		Stderr: os.Stderr,
	})
	if u := client.UnenforceableFrom(err); u != nil {
		log.Fatalf("refused: %s needs %s (%s: %s); %s", u.GetField(), u.GetMechanism(), u.GetProbe(), u.GetErrno(), u.GetRemedy())
	}
	if err != nil {
		log.Fatal(err)
	}
	os.Exit(client.ExitCode(res, nil))
}

// ExitCode gives a session's outcome the exit code a shell expects, as
// sandboxctl run exits: the command's own, 128+N for signal N, 126 and 127
// for a command that could not be executed or found, 125 for the daemon's
// refusal or failure.
func ExampleExitCode() {
	for _, exit := range []*sandboxdv1.Exit{
		{State: sandboxdv1.State_EXITED, ExitCode: 3},
		{State: sandboxdv1.State_KILLED, Reason: "timeout"},
		{State: sandboxdv1.State_FAILED_TO_START, ExitCode: client.ExitNotFound, Reason: "exec mkae: not found"},
	} {
		fmt.Println(client.StateName(exit.GetState()), client.ExitCode(&client.Result{Exit: exit}, nil))
	}
	fmt.Println("refused", client.ExitCode(nil, errors.New("start session: cannot enforce network.mode")))
	// Output:
	// exited 3
	// killed 137
	// failed-to-start 127
	// refused 125
}

// A refusal keeps the daemon's gRPC status, so a program can read why
// and decide, say, to ask for less rather than fail.
func ExampleUnenforceableFrom() {
	st, err := status.New(codes.FailedPrecondition, "cannot enforce network.mode").WithDetails(&sandboxdv1.Unenforceable{
		Field:     "network.mode",
		Mechanism: "network namespace",
		Probe:     "unshare(CLONE_NEWNET)",
		Errno:     "EPERM",
		Remedy:    "allow unprivileged user namespaces, or run the daemon as root",
	})
	if err != nil {
		log.Fatal(err)
	}
	refusal := fmt.Errorf("start session: %w", st.Err())

	if u := client.UnenforceableFrom(refusal); u != nil {
		fmt.Printf("%s: needs %s\nremedy: %s\n", u.GetField(), u.GetMechanism(), u.GetRemedy())
	}
	fmt.Println(status.Code(refusal))
	// Output:
	// network.mode: needs network namespace
	// remedy: allow unprivileged user namespaces, or run the daemon as root
	// FailedPrecondition
}

// Record is an event in the JSON form sandboxctl events --json prints,
// for logs and other programs.
func ExampleRecord() {
	ev := &sandboxdv1.Event{
		Seq:       42,
		Time:      timestamppb.New(time.Date(2026, 11, 25, 16, 49, 53, 0, time.UTC)),
		SessionId: "2346b5632b90ac7e",
		Kind: &sandboxdv1.Event_Denial{Denial: &sandboxdv1.Denial{
			Field: "filesystem.write", Operation: "openat", Target: "/home/me/.agentrc",
			Pid: 8, Command: "sh", Errno: "EROFS",
		}},
	}
	b, err := json.Marshal(client.Record(ev))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(b))
	// Output:
	// {"seq":42,"time":"2026-11-25T16:49:53Z","session":"2346b5632b90ac7e","type":"denial","denial":{"field":"filesystem.write","operation":"openat","target":"/home/me/.agentrc","pid":8,"command":"sh","errno":"EROFS"}}
}

// A supervisor follows its sessions' state changes and denials as they
// happen; inside a sandbox that may start children, the same call sees
// only that sandbox's subtree.
func ExampleClient_Watch() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := client.Dial(ctx, "")
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	err = cl.Watch(ctx, &sandboxdv1.WatchRequest{NoStates: true}, func(ev *sandboxdv1.Event) error {
		d := ev.GetDenial()
		fmt.Printf("%s denied %s %s (%s)\n", ev.GetSessionId(), d.GetOperation(), d.GetTarget(), d.GetField())
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
}

// An operator lists the sessions it may see and inspects one.
func ExampleClient_List() {
	ctx := context.Background()
	cl, err := client.Dial(ctx, "")
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	sessions, err := cl.List(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range sessions {
		info, err := cl.Inspect(ctx, s.GetId())
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(info.GetId(), client.StateName(info.GetState()), info.GetPolicyDigest(), info.GetArgv())
	}
}

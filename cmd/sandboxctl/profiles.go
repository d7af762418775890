package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"text/tabwriter"

	"github.com/sandboxd/sandboxd/policy"
	"github.com/sandboxd/sandboxd/profiles"
)

const profilesUsage = `usage: sandboxctl profiles

Lists the agent profiles run --profile NAME takes, with where each comes
from: ~/.config/sandboxd/profiles/NAME.json first, then
/etc/sandboxd/profiles/NAME.json, then the built-in ones. A profile that
one earlier in that order hides is marked shadowed.

A profile file is JSON: {"version": 1, "description": "...", "write":
["~/.agent"], "allow_hosts": ["api.example.com:443"], "env": ["AGENT_KEY"],
"set_env": {"AGENT_HOME": "~/.agent"}}. Under it the directories in write
are writable (and made if missing), the network reaches only allow_hosts,
HOME is the caller's, and the variables in env are passed on when set.

flags:
`

func profilesVerb(_ context.Context, c *cli, args []string) int {
	fs := flag.NewFlagSet("sandboxctl profiles", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), profilesUsage)
		fs.PrintDefaults()
	}
	if code, ok := c.parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		c.usageError(fs.Name(), fmt.Sprintf("unexpected argument %q", fs.Arg(0)))
		return exitUsage
	}
	home, _ := os.UserHomeDir()
	all, err := profiles.List(profiles.Dirs(home))
	if err != nil {
		fmt.Fprintf(c.stderr, "sandboxctl profiles: %v\n", err)
		return exitFailed
	}
	w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tVERSION\tORIGIN\tDESCRIPTION")
	for _, p := range all {
		origin := p.Origin
		if p.Shadowed {
			origin += " (shadowed)"
		}
		fmt.Fprintf(w, "%s\t%d\t%s\t%s\n", p.Name, p.Version, origin, p.Description)
	}
	if err := w.Flush(); err != nil {
		fmt.Fprintf(c.stderr, "sandboxctl profiles: %v\n", err)
		return exitFailed
	}
	return 0
}

// applyProfiles loads run's --profile NAMEs and keeps what they add: the
// policy fragment for start to merge, their environment before --env's
// (which overrides it). It makes their directories now, so that the
// daemon finds the write roots it is asked for. An unknown name is a
// command-line mistake; a profile file that is broken, or a directory that
// cannot be made, is a policy refused.
func (f *runFlags) applyProfiles() error {
	if len(f.profiles) == 0 {
		return nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return policyError{fmt.Errorf("--profile: %w", err)}
	}
	dirs := profiles.Dirs(home)
	var env stringList
	for _, name := range f.profiles {
		found, err := profiles.Load(name, dirs)
		var nf *profiles.NotFoundError
		if errors.As(err, &nf) {
			var names []string
			if all, err := profiles.List(dirs); err == nil {
				for _, p := range all {
					names = append(names, p.Name)
				}
			}
			return fmt.Errorf("--profile %s: no such profile%s", name, didYouMean(name, names, strconv.Quote))
		}
		if err != nil {
			return policyError{fmt.Errorf("--profile: %w", err)}
		}
		a, err := found.Apply(home, os.Getenv)
		if err != nil {
			return policyError{fmt.Errorf("--profile: %w", err)}
		}
		for _, d := range a.MakeDirs {
			if err := makeProfileDir(d); err != nil {
				return policyError{fmt.Errorf("--profile %s: %w", name, err)}
			}
		}
		f.profilePolicy = policy.Merge(f.profilePolicy, a.Policy)
		for k, v := range a.Env {
			env = append(env, k+"="+v)
		}
	}
	f.env = append(env, f.env...)
	return nil
}

// makeProfileDir makes a profile's directory private, as agents keep
// credentials in it, and missing parents (~/.cache, ~/.local/share)
// searchable, as they are by convention: a root caller's sandbox runs as
// another uid, which must get through them to the write root.
func makeProfileDir(d string) error {
	if err := os.MkdirAll(filepath.Dir(d), 0o755); err != nil {
		return err
	}
	if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return nil
}

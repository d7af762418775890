package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/policy"
)

const importUsage = `usage: sandboxctl import srt|codex [--lossy] [--profile NAME] FILE > policy.json

Prints the sandboxd policy file (for run --policy) that a settings file of
another sandbox means. FILE is "-" for stdin.

  srt     Anthropic sandbox-runtime settings JSON: filesystem allowWrite,
          denyWrite, denyRead; network allowedDomains, deniedDomains
  codex   Codex config.toml: sandbox_mode, [sandbox_workspace_write],
          [profiles.NAME], default_permissions of a built-in profile

"~" and relative paths are resolved here, against $HOME and the current
directory, as the tool would where it runs; codex's workspace is the
current directory and its $TMPDIR is this one. A key with no exact sandboxd
equivalent is refused, naming it, and nothing is printed. With --lossy it is
a warning on stderr instead, and the key is imported narrower, usually
dropped: the policy never allows what the settings do not. Exits 1 when the
file is refused.

flags:
`

func importVerb(_ context.Context, c *cli, args []string) int {
	fs := flag.NewFlagSet("sandboxctl import", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), importUsage)
		fs.PrintDefaults()
	}
	lossy := fs.Bool("lossy", false, "import keys with no exact equivalent narrower, with a warning each, instead of refusing")
	profile := fs.String("profile", "", "codex: apply config profile `NAME` ([profiles.NAME]) instead of the file's profile key")
	if code, ok := c.parseFlags(fs, args); !ok {
		return code
	}
	pos := fs.Args()
	// Flags may also come between or after the arguments.
	for i := 0; i < len(pos); i++ {
		if len(pos[i]) > 1 && pos[i][0] == '-' {
			if code, ok := c.parseFlags(fs, pos[i:]); !ok {
				return code
			}
			pos = append(pos[:i:i], fs.Args()...)
			i--
		}
	}
	if len(pos) != 2 {
		c.usageError(fs.Name(), "want a format, srt or codex, and a FILE")
		return exitUsage
	}
	format, file := pos[0], pos[1]
	if format != "srt" && format != "codex" {
		c.usageError(fs.Name(), fmt.Sprintf("unknown format %q%s", format, didYouMean(format, []string{"codex", "srt"}, strconv.Quote)))
		return exitUsage
	}
	if *profile != "" && format != "codex" {
		c.usageError(fs.Name(), "--profile is codex's")
		return exitUsage
	}
	data, err := readFileOrStdin(file, c.stdin)
	if err != nil {
		fmt.Fprintf(c.stderr, "sandboxctl import: %v\n", err)
		return exitFailed
	}
	home, _ := os.UserHomeDir()
	wd, _ := os.Getwd()
	opts := policy.ImportOptions{Home: home, Cwd: wd, TempDir: os.Getenv("TMPDIR"), Lossy: *lossy}
	var p *sandboxdv1.Policy
	var warnings []*policy.KeyError
	if format == "srt" {
		p, warnings, err = policy.ImportSRT(data, opts)
	} else {
		p, warnings, err = policy.ImportCodex(data, *profile, opts)
	}
	if err != nil {
		fmt.Fprintf(c.stderr, "sandboxctl import %s %s: %v\n", format, file, err)
		return exitFailed
	}
	for _, w := range warnings {
		fmt.Fprintf(c.stderr, "sandboxctl import: warning: %v\n", w)
	}
	out, err := encodePolicyFile(p)
	if err != nil {
		fmt.Fprintf(c.stderr, "sandboxctl import: %v\n", err)
		return exitFailed
	}
	if _, err := c.stdout.Write(out); err != nil {
		fmt.Fprintf(c.stderr, "sandboxctl import: %v\n", err)
		return exitFailed
	}
	return 0
}

func readFileOrStdin(name string, stdin io.Reader) ([]byte, error) {
	if name == "-" {
		data, err := io.ReadAll(stdin)
		if err != nil {
			return nil, fmt.Errorf("read stdin: %w", err)
		}
		return data, nil
	}
	return os.ReadFile(name)
}

// encodePolicyFile renders p as a --policy file, indented the same way on
// every build (policy.Encode's whitespace is not stable), so that files
// made from the same settings compare equal.
func encodePolicyFile(p *sandboxdv1.Policy) ([]byte, error) {
	enc, err := policy.Encode(p)
	if err != nil {
		return nil, err
	}
	var compact, out bytes.Buffer
	if err := json.Compact(&compact, enc); err != nil {
		return nil, fmt.Errorf("encode policy: %w", err)
	}
	if err := json.Indent(&out, compact.Bytes(), "", "  "); err != nil {
		return nil, fmt.Errorf("encode policy: %w", err)
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

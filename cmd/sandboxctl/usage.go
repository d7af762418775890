package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The flag package's own messages, as it words them, so that a mistake
// can be said as the user typed it: "--timeout 5: missing unit, e.g. 5s"
// rather than "invalid value "5" for flag -timeout: ...". They are compiled
// when a command line has a mistake, not at every start of sandboxctl.
const (
	flagUndefined = `^flag provided but not defined: -+(.*)$`
	flagInvalid   = `^invalid (boolean )?value ("(?:[^"\\]|\\.)*") for (?:flag )?-+([^:]+): (.*)$`
	flagNoValue   = `^flag needs an argument: -+(.*)$`
)

// parseFlags parses a verb's flags. --help prints the verb's usage on
// stdout, so that it can be paged, and is not an error; a mistake is one
// line on stderr naming it, with the nearest flag when one is close, and
// exits exitUsage. ok is false when the verb is to return code at once.
func (c *cli) parseFlags(fs *flag.FlagSet, args []string) (code int, ok bool) {
	err := parseQuietly(fs, args)
	if err == nil {
		return 0, true
	}
	if errors.Is(err, flag.ErrHelp) {
		c.printHelp(fs)
		return 0, false
	}
	c.usageError(fs.Name(), err.Error())
	return exitUsage, false
}

// parseVerb is parseFlags for a verb that takes nargs arguments (0, or 1
// for a session ID), which it returns. Flags may also follow the
// argument, as in "inspect ID --json"; after "--" everything is an
// argument.
func (c *cli) parseVerb(fs *flag.FlagSet, args []string, nargs int) (_ []string, code int, ok bool) {
	var pos []string
	for {
		if code, ok := c.parseFlags(fs, args); !ok {
			return nil, code, false
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if ended := len(args) > len(rest) && args[len(args)-len(rest)-1] == "--"; ended {
			pos = append(pos, rest...)
			break
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
	switch {
	case len(pos) == nargs:
		return pos, 0, true
	case len(pos) < nargs:
		c.usageError(fs.Name(), "missing session ID")
	default:
		c.usageError(fs.Name(), fmt.Sprintf("unexpected argument %q", pos[nargs]))
	}
	return nil, exitUsage, false
}

// parseQuietly parses args into fs with the flag package printing
// nothing, and returns its error reworded (see flagError). The flag
// package writes the usage on --help and on a mistake; it is not run at
// all rather than run into nothing, since --help prints it afterwards and
// it is most of what sandboxctl --help does.
func parseQuietly(fs *flag.FlagSet, args []string) error {
	out, usage := fs.Output(), fs.Usage
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	fs.SetOutput(out)
	fs.Usage = usage
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return err
	}
	return errors.New(flagError(fs, err))
}

// printHelp writes fs's usage, which its Usage writes to fs.Output(), on
// stdout.
func (c *cli) printHelp(fs *flag.FlagSet) {
	out := fs.Output()
	fs.SetOutput(c.stdout)
	fs.Usage()
	fs.SetOutput(out)
}

// usageError says what is wrong with a command line and where the help
// is, rather than printing the help itself, which would bury the one line
// that matters.
func (c *cli) usageError(name, msg string) {
	fmt.Fprintf(c.stderr, "%s: %s\nRun '%s --help' for usage.\n", name, msg, name)
}

// flagError words a parse error of fs as the user typed the flag, and
// for an unknown flag suggests the nearest ones.
func flagError(fs *flag.FlagSet, err error) string {
	msg := err.Error()
	match := func(pattern string) []string { return regexp.MustCompile(pattern).FindStringSubmatch(msg) }
	if m := match(flagUndefined); m != nil {
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		return "unknown flag " + dashed(m[1]) + didYouMean(m[1], names, dashed)
	}
	if m := match(flagInvalid); m != nil {
		value, uerr := strconv.Unquote(m[2])
		if uerr != nil {
			value = m[2]
		}
		why := m[4]
		if m[1] != "" {
			// strconv.ParseBool's "parse error" says nothing useful.
			why = "want true or false"
		}
		return fmt.Sprintf("%s %s: %s", dashed(m[3]), value, why)
	}
	if m := match(flagNoValue); m != nil {
		return dashed(m[1]) + " needs a value"
	}
	return msg
}

// dashed spells a flag as the help does: -q, --tree.
func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// didYouMean is "; did you mean X?" naming the candidates nearest to
// typed, or "" when none is near enough to be what was meant: at most two
// edits, and fewer than typed has letters, so that "-x" suggests nothing.
func didYouMean(typed string, candidates []string, spell func(string) string) string {
	best := 2
	var near []string
	for _, c := range candidates {
		d := editDistance(strings.ToLower(typed), strings.ToLower(c))
		if d >= utf8.RuneCountInString(typed) || d > best {
			continue
		}
		if d < best {
			best, near = d, near[:0]
		}
		near = append(near, spell(c))
	}
	if len(near) == 0 {
		return ""
	}
	slices.Sort(near)
	return "; did you mean " + strings.Join(near, " or ") + "?"
}

// editDistance is the Levenshtein distance of a and b (single-rune
// insertions, deletions and substitutions) counting a swap of two
// neighbours as one edit too, the commonest typo ("sp" for "ps"), which
// plain Levenshtein counts as two.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}

// durationFlag is a duration flag whose mistakes say what is missing:
// flag.Duration answers "5" with only "parse error".
type durationFlag struct{ d *time.Duration }

func (f durationFlag) String() string {
	if f.d == nil {
		return ""
	}
	return f.d.String()
}

func (f durationFlag) Set(v string) error {
	d, err := parseDuration(v)
	if err != nil {
		return err
	}
	*f.d = d
	return nil
}

func parseDuration(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err == nil {
		return d, nil
	}
	if _, ferr := strconv.ParseFloat(v, 64); ferr == nil {
		return 0, fmt.Errorf("missing unit, e.g. %ss", v)
	}
	return 0, errors.New("not a duration: want a number with a unit (ns, us, ms, s, m, h), e.g. 30s, 5m or 1h30m")
}

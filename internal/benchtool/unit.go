//go:build linux

package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// unitLimit is one resource limit a systemd unit sets on the daemon.
type unitLimit struct {
	key, value string
}

// unitLimits reads the [Service] resource limits of the systemd unit at
// path: the Limit* rlimits and the cgroup limits (TasksMax, Memory*), in
// file order.
func unitLimits(path string) ([]unitLimit, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []unitLimit
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[") {
			section = line
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || section != "[Service]" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if strings.HasPrefix(k, "Limit") || k == "TasksMax" || strings.HasPrefix(k, "Memory") {
			out = append(out, unitLimit{k, v})
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// rlimitNames maps a unit's Limit* keys to their lines in /proc/PID/limits.
var rlimitNames = map[string]string{
	"LimitNOFILE":  "Max open files",
	"LimitNPROC":   "Max processes",
	"LimitMEMLOCK": "Max locked memory",
	"LimitAS":      "Max address space",
	"LimitSTACK":   "Max stack size",
	"LimitCORE":    "Max core file size",
}

// parseLimit reads a limit's value: a number, or "infinity"/"unlimited"
// (-1). A Limit*'s "soft:hard" form gives its soft part.
func parseLimit(v string) (int64, bool) {
	v, _, _ = strings.Cut(v, ":")
	switch v {
	case "infinity", "unlimited":
		return -1, true
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil
}

// unitLimitNotes says, per limit of the unit, whether the daemon ran with
// it and whether holding held sessions stayed within it: for the rlimits
// what the daemon's /proc/PID/limits shows and what it used, for TasksMax
// the tasks of the daemon's tree (its cgroup, under systemd).
func unitLimitNotes(unit string, limits []unitLimit, daemon, held, daemonFds, daemonTasks int) []string {
	var out []string
	for _, l := range limits {
		want, ok := parseLimit(l.value)
		if !ok {
			out = append(out, fmt.Sprintf("%s %s=%s: not understood by benchtool", unit, l.key, l.value))
			continue
		}
		switch {
		case rlimitNames[l.key] != "":
			line := limitLine(daemon, rlimitNames[l.key])
			soft, ok := parseLimit(strings.Fields(line + " ?")[0])
			applied := ok && (want == -1 && soft == -1 || want != -1 && (soft == -1 || soft >= want))
			s := fmt.Sprintf("%s %s=%s: the daemon ran with %q (soft hard units)", unit, l.key, l.value, line)
			if !applied {
				s += " - NOT the unit's (this shell could not raise it; the figure is for the lower limit)"
			}
			switch l.key {
			case "LimitNOFILE":
				within := soft == -1 || int64(daemonFds) < soft
				s += fmt.Sprintf("; %d fds open with %d sessions held: %s", daemonFds, held, metWord(within))
			default:
				s += "; not counted by benchtool"
			}
			out = append(out, s)
		case l.key == "TasksMax":
			within := want == -1 || int64(daemonTasks) <= want
			out = append(out, fmt.Sprintf("%s TasksMax=%s: %d tasks in the daemon's tree with %d sessions held: %s (not applied here: benchtool runs no systemd unit; the tree is what its cgroup would count)",
				unit, l.value, daemonTasks, held, metWord(within)))
		default:
			out = append(out, fmt.Sprintf("%s %s=%s: not applied or counted here (a cgroup limit systemd sets)", unit, l.key, l.value))
		}
	}
	return out
}

func metWord(ok bool) string {
	if ok {
		return "within it"
	}
	return "EXCEEDED"
}

// unitFlag is the value the unit's ExecStart gives the daemon's flag
// (--name VALUE or --name=VALUE), and whether it gives one.
func unitFlag(path, flag string) (string, bool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", false, err
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		cmd, ok := strings.CutPrefix(strings.TrimSpace(line), "ExecStart=")
		if !ok {
			continue
		}
		args := strings.Fields(cmd)
		for i, a := range args {
			if v, ok := strings.CutPrefix(a, flag+"="); ok {
				return v, true, nil
			}
			if a == flag && i+1 < len(args) {
				return args[i+1], true, nil
			}
		}
	}
	return "", false, nil
}

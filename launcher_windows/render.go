package launcherwindows

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

// Render is the plan as text, one fact a line, in the plan's order: what
// the golden files pin and what a reviewer reads. Derived SIDs are
// followed by what they stand for.
func (p *Plan) Render() string {
	var b strings.Builder
	line := func(format string, args ...any) {
		fmt.Fprintf(&b, format, args...)
		b.WriteByte('\n')
	}
	line("user: %s %s", show(p.User), p.sid(p.UserSID))
	line("token:")
	line("  disable max privilege: %v", p.Token.DisableMaxPrivilege)
	line("  write restricted: %v", p.Token.WriteRestricted)
	for _, s := range p.Token.DenyOnly {
		line("  deny only: %s", p.sid(s))
	}
	for _, s := range p.Token.Restricting {
		line("  restricting: %s", p.sid(s))
	}
	line("  integrity level: %s", p.sid(p.Token.IntegrityLevel))
	line("  default DACL: %s", show(p.Token.DefaultDACL))
	line("placeholders:")
	for _, ph := range p.Placeholders {
		line("  %s", show(ph))
	}
	line("aces:")
	for i, a := range p.ACEs {
		if i == 0 || p.ACEs[i-1].Path != a.Path {
			line("  %s", show(a.Path))
		}
		kind, scope, life := "deny", "this object only", "session"
		if a.Allow {
			kind = "allow"
		}
		if a.Inherit {
			scope = "inherited below"
		}
		if a.Persistent {
			life = "persistent"
		}
		line("    %s %s: %s; %s; %s; %s: %s", kind, p.sid(a.SID), maskString(a.Mask, maskNames), scope, life, a.Field, show(a.Why))
	}
	line("firewall:")
	for _, f := range p.Firewall {
		line("  %s at %s for %s: %s %s", f.Action, f.Layer, show(f.UserSDDL), f.ID, show(f.Name))
	}
	line("job:")
	line("  kill on close: %v", p.Job.KillOnClose)
	line("  die on unhandled exception: %v", p.Job.DieOnUnhandledException)
	line("  active process limit: %s", orNone(uint64(p.Job.ActiveProcessLimit), ""))
	line("  memory limit: %s", orNone(p.Job.JobMemoryLimit, " bytes"))
	line("  CPU rate: %s", orNone(uint64(p.Job.CPURate), "/10000"))
	line("  UI restrictions: %s", maskString(p.Job.UIRestrictions, uiLimitNames))
	line("desktop: %s", show(p.Desktop))
	line("env:")
	for _, kv := range p.Env {
		line("  %s", show(kv))
	}
	line("report:")
	for _, f := range p.Report {
		line("  %s: %s", f.GetField(), show(f.GetMechanism()))
	}
	return b.String()
}

// wellKnownSIDs name the SIDs every plan may use.
var wellKnownSIDs = map[string]string{
	LogonSID:                        "the session's logon SID",
	SIDBuiltinAdministrators:        "BUILTIN\\Administrators",
	SIDLocalAccountAndAdministrator: "local account and member of Administrators",
	SIDAuthenticatedUsers:           "Authenticated Users",
	SIDRestrictedCode:               "RESTRICTED",
	SIDMediumIntegrity:              "Medium integrity",
	NetworkNoneSID:                  "network NONE",
}

func (p *Plan) sid(s string) string {
	name, ok := p.sids[s]
	if !ok {
		name, ok = wellKnownSIDs[s]
	}
	if !ok {
		return show(s)
	}
	return show(s) + " (" + show(name) + ")"
}

// show is s as it is, or quoted when it would not read as one line.
func show(s string) string {
	if s == "" || strings.ContainsFunc(s, func(r rune) bool { return unicode.IsControl(r) || r == unicode.ReplacementChar }) || strings.TrimSpace(s) != s {
		return strconv.Quote(s)
	}
	return s
}

func orNone(n uint64, unit string) string {
	if n == 0 {
		return "none"
	}
	return strconv.FormatUint(n, 10) + unit
}

type bitName struct {
	bit  uint32
	name string
}

// maskString is m in hexadecimal and as the names of its bits.
func maskString(m uint32, names []bitName) string {
	if m == FILE_ALL_ACCESS && len(names) == len(maskNames) {
		return fmt.Sprintf("0x%06X FILE_ALL_ACCESS", m)
	}
	var parts []string
	rest := m
	for _, n := range names {
		if m&n.bit != 0 {
			parts = append(parts, n.name)
			rest &^= n.bit
		}
	}
	if rest != 0 {
		parts = append(parts, fmt.Sprintf("0x%X", rest))
	}
	return fmt.Sprintf("0x%06X %s", m, strings.Join(parts, "|"))
}

// maskNames name the bits of an access mask, lowest first, for Render.
var maskNames = []bitName{
	{FILE_READ_DATA, "FILE_READ_DATA"},
	{FILE_WRITE_DATA, "FILE_WRITE_DATA"},
	{FILE_APPEND_DATA, "FILE_APPEND_DATA"},
	{FILE_READ_EA, "FILE_READ_EA"},
	{FILE_WRITE_EA, "FILE_WRITE_EA"},
	{FILE_EXECUTE, "FILE_EXECUTE"},
	{FILE_DELETE_CHILD, "FILE_DELETE_CHILD"},
	{FILE_READ_ATTRIBUTES, "FILE_READ_ATTRIBUTES"},
	{FILE_WRITE_ATTRIBUTES, "FILE_WRITE_ATTRIBUTES"},
	{DELETE, "DELETE"},
	{READ_CONTROL, "READ_CONTROL"},
	{WRITE_DAC, "WRITE_DAC"},
	{WRITE_OWNER, "WRITE_OWNER"},
	{SYNCHRONIZE, "SYNCHRONIZE"},
}

var uiLimitNames = []bitName{
	{JOB_OBJECT_UILIMIT_HANDLES, "HANDLES"},
	{JOB_OBJECT_UILIMIT_READCLIPBOARD, "READCLIPBOARD"},
	{JOB_OBJECT_UILIMIT_WRITECLIPBOARD, "WRITECLIPBOARD"},
	{JOB_OBJECT_UILIMIT_SYSTEMPARAMETERS, "SYSTEMPARAMETERS"},
	{JOB_OBJECT_UILIMIT_DISPLAYSETTINGS, "DISPLAYSETTINGS"},
	{JOB_OBJECT_UILIMIT_GLOBALATOMS, "GLOBALATOMS"},
	{JOB_OBJECT_UILIMIT_DESKTOP, "DESKTOP"},
	{JOB_OBJECT_UILIMIT_EXITWINDOWS, "EXITWINDOWS"},
}

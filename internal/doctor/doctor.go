// Package doctor formats a Capabilities report for people: what the host
// is, what the backend's probes found, which mechanism sets it can use,
// per policy feature whether it is enforceable and by what or why not, and
// the self-test. `sandboxd --self-test` and `sandboxctl doctor` print the
// same text through it.
package doctor

import (
	"fmt"
	"io"
	"strings"
	"time"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// Print writes r for a human, one fact per line, in sections.
func Print(w io.Writer, r *sandboxdv1.CapabilitiesReport) {
	fmt.Fprintf(w, "backend: %s\n", orUnknown(r.GetBackend()))
	printHost(w, r.GetHost())
	printProbes(w, r.GetProbes())
	printMechanismSets(w, r.GetMechanismSets(), r.GetForcedMechanismSet())
	printFeatures(w, r.GetFeatures())
	printSelfTest(w, r.GetSelfTest())
}

func printHost(w io.Writer, h *sandboxdv1.HostFacts) {
	fmt.Fprintf(w, "\nhost:\n")
	if h == nil {
		fmt.Fprintf(w, "  (not reported)\n")
		return
	}
	fmt.Fprintf(w, "  os: %s\n", orUnknown(h.GetOs()))
	fmt.Fprintf(w, "  kernel: %s\n", orUnknown(h.GetKernel()))
	var as []string
	if h.GetRoot() {
		as = append(as, "root")
	}
	if h.GetRootless() {
		as = append(as, "rootless")
	}
	if h.GetEuid() == 0 && !h.GetRoot() && !h.GetRootless() {
		as = append(as, "root of a container, not of the host")
	}
	euid := fmt.Sprint(h.GetEuid())
	if len(as) > 0 {
		euid += " (" + strings.Join(as, ", ") + ")"
	}
	fmt.Fprintf(w, "  euid: %s\n", euid)
	fmt.Fprintf(w, "  container: %s\n", orNone(h.GetContainer()))
	abi := "none"
	if h.GetLandlockAbi() > 0 {
		abi = fmt.Sprint(h.GetLandlockAbi())
	}
	fmt.Fprintf(w, "  landlock ABI: %s\n", abi)
}

func printProbes(w io.Writer, probes []*sandboxdv1.ProbeResult) {
	fmt.Fprintf(w, "\nprobes:\n")
	if len(probes) == 0 {
		fmt.Fprintf(w, "  (none reported)\n")
	}
	for _, p := range probes {
		line := p.GetName()
		if op := p.GetOperation(); op != "" {
			line += ": " + op
		}
		if e := p.GetErrno(); e != "" {
			line += ": " + e
		}
		fmt.Fprintf(w, "  %s %s\n", verdict(p.GetOk()), line)
		if d := p.GetDetail(); d != "" {
			fmt.Fprintf(w, "       %s\n", d)
		}
	}
}

func printMechanismSets(w io.Writer, sets []*sandboxdv1.MechanismSet, forced string) {
	choice := "chosen per policy"
	if forced != "" {
		choice = "forced: " + forced
	}
	fmt.Fprintf(w, "\nmechanism sets (%s):\n", choice)
	if len(sets) == 0 {
		fmt.Fprintf(w, "  (none reported)\n")
	}
	for _, m := range sets {
		avail := "available"
		if !m.GetAvailable() {
			avail = "not available"
		}
		line := m.GetName() + ": " + avail
		if d := m.GetDescription(); d != "" {
			line += " (" + d + ")"
		}
		fmt.Fprintf(w, "  %s\n", line)
		for _, miss := range m.GetMissing() {
			fmt.Fprintf(w, "    missing: %s\n", miss)
		}
	}
}

func printFeatures(w io.Writer, features []*sandboxdv1.FeatureSupport) {
	fmt.Fprintf(w, "\nfeatures:\n")
	if len(features) == 0 {
		fmt.Fprintf(w, "  (none reported)\n")
	}
	for _, f := range features {
		if f.GetEnforceable() {
			line := f.GetFeature() + ": enforceable yes"
			if m := f.GetMechanismSet(); m != "" {
				line += ", by " + m
			}
			fmt.Fprintf(w, "  %s\n", line)
			for _, e := range f.GetEnforcement() {
				fmt.Fprintf(w, "    %s: %s\n", e.GetField(), e.GetMechanism())
			}
			continue
		}
		fmt.Fprintf(w, "  %s: enforceable no\n", f.GetFeature())
		if u := f.GetRefusal(); u != nil {
			if u.GetField() != "" {
				fmt.Fprintf(w, "    field: %s\n", u.GetField())
			}
			WriteRefusal(w, "    ", u)
		}
	}
}

func printSelfTest(w io.Writer, st *sandboxdv1.SelfTest) {
	fmt.Fprintf(w, "\nself-test: %s\n", SelfTestVerdict(st))
	for _, c := range st.GetChecks() {
		line := c.GetName()
		if d := c.GetDetail(); d != "" {
			line += ": " + d
		}
		fmt.Fprintf(w, "  %s %s\n", verdict(c.GetOk()), line)
	}
}

// SelfTestVerdict is the self-test's outcome in a few words: "passed",
// "FAILED" or "not run", with the mechanism set and when it ran.
func SelfTestVerdict(st *sandboxdv1.SelfTest) string {
	if st == nil {
		return "not run"
	}
	v := "FAILED"
	if st.GetPassed() {
		v = "passed"
	} else if len(st.GetChecks()) == 1 && st.GetChecks()[0].GetName() == "pending" {
		return "pending"
	}
	var about []string
	if m := st.GetMechanismSet(); m != "" {
		about = append(about, "mechanism set "+m)
	}
	if st.GetRan() != nil {
		about = append(about, "ran "+st.GetRan().AsTime().UTC().Format(time.RFC3339))
	}
	if len(about) > 0 {
		v += " (" + strings.Join(about, ", ") + ")"
	}
	return v
}

// WriteRefusal writes the facts of a refusal after indent, one per line,
// leaving out the ones the backend did not give: what enforcing the field
// needs, what the host has, the probe and its errno, and the remedy.
func WriteRefusal(w io.Writer, indent string, u *sandboxdv1.Unenforceable) {
	line := func(label, value string) {
		if value != "" {
			fmt.Fprintf(w, "%s%s: %s\n", indent, label, value)
		}
	}
	line("needs", u.GetMechanism())
	line("found", u.GetFound())
	switch {
	case u.GetProbe() != "" && u.GetErrno() != "":
		line("probe", u.GetProbe()+": "+u.GetErrno())
	case u.GetProbe() != "":
		line("probe", u.GetProbe())
	default:
		line("errno", u.GetErrno())
	}
	line("remedy", u.GetRemedy())
}

// verdict is fixed-width, so the names after it line up.
func verdict(ok bool) string {
	if ok {
		return "ok  "
	}
	return "FAIL"
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

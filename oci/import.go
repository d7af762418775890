package oci

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/policy"
)

// Imported is what a config asks sandboxd to run.
type Imported struct {
	Policy   *sandboxdv1.Policy
	Argv     []string
	Env      map[string]string
	Cwd      string
	Terminal bool
}

// schema describes the JSON the importer reads: an object (fields), a
// list of one kind (listOf), a value taken as it is (nil), or a field
// sandboxd would have to ignore (refused), which is refused whenever the
// config gives it a value.
type (
	fields  map[string]any
	listOf  struct{ elem any }
	refused string
)

// configSchema is built at the first import, not at every start of
// sandboxctl, which links the importer for run --oci alone.
var configSchema = sync.OnceValue(func() fields {
	idMapping := listOf{fields{"containerID": nil, "hostID": nil, "size": nil}}
	capSets := fields{
		"bounding": nil, "effective": nil, "inheritable": nil, "permitted": nil, "ambient": nil,
	}
	otherPlatform := refused("a section for another platform")
	return fields{
		"ociVersion": nil,
		"process": fields{
			"terminal": nil, "consoleSize": fields{"height": nil, "width": nil},
			// The daemon runs every sandbox as its sandbox uid; what the
			// config names is replaced, never widened.
			"user": fields{
				"uid": nil, "gid": nil,
				"umask":          refused("the daemon does not set a umask"),
				"additionalGids": refused("sandboxes have no supplementary groups"),
				"username":       otherPlatform,
			},
			"args": nil, "env": nil, "cwd": nil,
			"commandLine":     otherPlatform,
			"capabilities":    capSets,
			"rlimits":         refused("sandboxd sets no rlimits; limits are cgroup resources"),
			"noNewPrivileges": nil,
			"apparmorProfile": refused("sandboxd loads no AppArmor profile"),
			"oomScoreAdj":     refused("sandboxd does not set an OOM score"),
			"scheduler":       refused("sandboxd does not set a scheduling policy"),
			"selinuxLabel":    refused("sandboxd sets no SELinux label"),
			"ioPriority":      refused("sandboxd does not set an I/O priority"),
			"execCPUAffinity": refused("sandboxd does not set CPU affinity"),
		},
		"root":       fields{"path": nil, "readonly": nil},
		"hostname":   nil,
		"domainname": nil,
		"mounts": listOf{fields{
			"destination": nil, "type": nil, "source": nil, "options": nil,
			"uidMappings": refused("sandboxd ID-maps write roots itself, by their owner"),
			"gidMappings": refused("sandboxd ID-maps write roots itself, by their owner"),
		}},
		"hooks":       refused("sandboxd runs no hooks"),
		"annotations": nil,
		"linux": fields{
			"uidMappings": idMapping, "gidMappings": idMapping,
			"sysctl": refused("sandboxd sets no sysctls"),
			"resources": fields{
				"devices": listOf{fields{"allow": nil, "type": nil, "major": nil, "minor": nil, "access": nil}},
				"memory":  fields{"limit": nil, "swap": nil},
				"cpu":     fields{"quota": nil, "period": nil},
				"pids":    fields{"limit": nil},
			},
			"cgroupsPath": nil,
			"namespaces":  listOf{fields{"type": nil, "path": refused("sandboxd makes every namespace new; it joins none")}},
			"devices":     refused("sandboxes get the default devices only"),
			"netDevices":  refused("sandboxd moves no network device into a sandbox"),
			"seccomp": fields{
				"defaultAction": nil, "defaultErrnoRet": nil, "architectures": nil, "flags": nil,
				"listenerPath":     refused("sandboxd's own daemon holds the listener"),
				"listenerMetadata": refused("sandboxd's own daemon holds the listener"),
				"syscalls": listOf{fields{
					"names": nil, "action": nil, "errnoRet": nil,
					"args": listOf{fields{"index": nil, "value": nil, "valueTwo": nil, "op": nil}},
				}},
			},
			"rootfsPropagation": nil,
			"maskedPaths":       nil,
			"readonlyPaths":     nil,
			"mountLabel":        refused("sandboxd sets no SELinux label"),
			"intelRdt":          refused("sandboxd does not set Intel RDT"),
			"memoryPolicy":      refused("sandboxd does not set a NUMA policy"),
			"personality":       refused("sandboxd does not set a personality"),
			"timeOffsets":       refused("sandboxd makes no time namespace"),
		},
		"solaris": otherPlatform, "windows": otherPlatform, "vm": otherPlatform, "zos": otherPlatform, "freebsd": otherPlatform,
	}
})

// checkSchema refuses, with its JSON path, the first field (in document
// order of the schema's keys, sorted) that is unknown or refused.
func checkSchema(path string, v any, s any) error {
	switch s := s.(type) {
	case nil:
		return nil
	case refused:
		if present(v) {
			return &Refusal{Field: path, Reason: string(s)}
		}
		return nil
	case fields:
		if v == nil {
			return nil
		}
		obj, ok := v.(map[string]any)
		if !ok {
			return &Refusal{Field: path, Reason: "not an object"}
		}
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			sub, known := s[k]
			p := join(path, k)
			if !known {
				return &Refusal{Field: p, Reason: "unknown field"}
			}
			if err := checkSchema(p, obj[k], sub); err != nil {
				return err
			}
		}
		return nil
	case listOf:
		if v == nil {
			return nil
		}
		arr, ok := v.([]any)
		if !ok {
			return &Refusal{Field: path, Reason: "not a list"}
		}
		for i, e := range arr {
			if err := checkSchema(path+"["+strconv.Itoa(i)+"]", e, s.elem); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("schema at %s: %T", path, s)
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

// present says whether a JSON value asks for something: not null, not an
// empty list or object, not false, zero or "".
func present(v any) bool {
	switch v := v.(type) {
	case nil:
		return false
	case bool:
		return v
	case string:
		return v != ""
	case json.Number:
		return v.String() != "0"
	case []any:
		return len(v) > 0
	case map[string]any:
		return len(v) > 0
	}
	return true
}

// Import reads an OCI config into what sandboxd runs. hidden are paths
// the daemon masks in every sandbox (its own sockets), which a config
// exported by sandboxd masks too and which need no deny entry.
func Import(data []byte, hidden []string) (*Imported, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if dec.More() {
		return nil, errors.New("config: more than one JSON value")
	}
	if _, ok := doc.(map[string]any); !ok {
		return nil, &Refusal{Field: "(root)", Reason: "not an object"}
	}
	if err := checkSchema("", doc, configSchema()); err != nil {
		return nil, err
	}
	var s specs.Spec
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	im := &Imported{Policy: &sandboxdv1.Policy{Filesystem: &sandboxdv1.Filesystem{}, Network: &sandboxdv1.Network{}, Limits: &sandboxdv1.Limits{}}}
	if err := importProcess(im, s.Process); err != nil {
		return nil, err
	}
	netns, err := importNamespaces(s.Linux)
	if err != nil {
		return nil, err
	}
	im.Policy.Network.Mode = sandboxdv1.Network_HOST
	if netns {
		im.Policy.Network.Mode = sandboxdv1.Network_NONE
	}
	if err := importMounts(im.Policy.Filesystem, &s); err != nil {
		return nil, err
	}
	if s.Linux != nil {
		if err := importPaths(im.Policy.Filesystem, s.Linux, hidden); err != nil {
			return nil, err
		}
		if err := importResources(im.Policy.Limits, s.Linux.Resources); err != nil {
			return nil, err
		}
		if err := importSeccomp(s.Linux.Seccomp, netns); err != nil {
			return nil, err
		}
	}
	// Outside the write roots everything is read-only already, and a
	// carve-out there is no policy's.
	fs := im.Policy.Filesystem
	fs.ReadOnly = slices.DeleteFunc(fs.ReadOnly, func(p string) bool { return !within(p, fs.Write) })
	if err := policy.Validate(im.Policy); err != nil {
		return nil, fmt.Errorf("policy from the config: %w", err)
	}
	im.Policy = policy.Normalize(im.Policy)
	return im, nil
}

func importProcess(im *Imported, p *specs.Process) error {
	if p == nil || len(p.Args) == 0 {
		return &Refusal{Field: "process.args", Reason: "no command"}
	}
	if c := p.Capabilities; c != nil {
		for name, set := range map[string][]string{"bounding": c.Bounding, "effective": c.Effective, "inheritable": c.Inheritable, "permitted": c.Permitted, "ambient": c.Ambient} {
			if len(set) > 0 {
				return &Refusal{Field: "process.capabilities." + name, Reason: "sandboxes hold no capabilities"}
			}
		}
	} else {
		// No capabilities object: a runtime keeps its default set.
		return &Refusal{Field: "process.capabilities", Reason: "absent, which runtimes read as their default set; sandboxes hold none: give every set empty"}
	}
	im.Argv, im.Cwd, im.Terminal = p.Args, p.Cwd, p.Terminal
	for i, kv := range p.Env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return &Refusal{Field: "process.env[" + strconv.Itoa(i) + "]", Reason: "not NAME=VALUE"}
		}
		if im.Env == nil {
			im.Env = map[string]string{}
		}
		im.Env[k] = v
	}
	return nil
}

// importNamespaces reports whether the config has a network namespace of
// its own. A namespace left out is made by sandboxd all the same.
func importNamespaces(lx *specs.Linux) (netns bool, err error) {
	if lx == nil {
		return false, nil
	}
	for i, ns := range lx.Namespaces {
		switch ns.Type {
		case specs.NetworkNamespace:
			netns = true
		case specs.PIDNamespace, specs.IPCNamespace, specs.UTSNamespace, specs.MountNamespace, specs.UserNamespace, specs.CgroupNamespace:
		case specs.TimeNamespace:
			return false, &Refusal{Field: fmt.Sprintf("linux.namespaces[%d]", i), Reason: "sandboxd makes no time namespace"}
		default:
			return false, &Refusal{Field: fmt.Sprintf("linux.namespaces[%d].type", i), Reason: "unknown namespace " + string(ns.Type)}
		}
	}
	return netns, nil
}

// systemMounts are the filesystems every sandbox has of its own (or, for
// /sys, the host's read-only): a config's mount of one is sandboxd's.
var systemMounts = map[string]string{
	"/proc": "proc", "/dev": "tmpfs", "/dev/pts": "devpts", "/dev/shm": "tmpfs", "/dev/mqueue": "mqueue",
	"/sys": "sysfs", "/sys/fs/cgroup": "cgroup",
}

func importMounts(fs *sandboxdv1.Filesystem, s *specs.Spec) error {
	hostRoot := s.Root != nil && s.Root.Path == "/" && s.Root.Readonly
	for i, m := range s.Mounts {
		path := fmt.Sprintf("mounts[%d]", i)
		ro := slices.Contains(m.Options, "ro") || slices.Contains(m.Options, "rro")
		bind := m.Type == "bind" || slices.Contains(m.Options, "bind") || slices.Contains(m.Options, "rbind")
		refuse := func(why string) error { return &Refusal{Field: path, Reason: why} }
		switch {
		case m.Destination == "/" && i == 0:
			if !bind || m.Source != "/" || !ro {
				return refuse("sandboxd's root is the host's tree, read-only: only a first mount binding / read-only at / says that")
			}
			hostRoot = true
		case m.Destination == "/" && (!bind || m.Source != "/"):
			return refuse("sandboxd's root is the host's tree: another tree at / would be ignored")
		case !hostRoot:
			return &Refusal{Field: "root.path", Reason: "sandboxd runs on the host's tree, read-only: bind / read-only at / as the first mount"}
		case systemMounts[m.Destination] != "" && systemMounts[m.Destination] == m.Type:
			if strings.HasPrefix(m.Destination, "/sys") && !ro {
				return refuse("sandboxes see the host's /sys read-only")
			}
		case m.Destination == "/tmp" && m.Type == "tmpfs" && !ro:
			// Every sandbox has a private /tmp unless it is a write root.
		case bind && m.Source == m.Destination:
			if ro {
				fs.ReadOnly = append(fs.ReadOnly, m.Destination)
			} else {
				fs.Write = append(fs.Write, m.Destination)
			}
		case bind && m.Source == maskFileSrc:
			fs.Deny = append(fs.Deny, m.Destination)
		case bind:
			return refuse("sandboxd shows host paths where they are: a bind from " + m.Source + " to " + m.Destination + " moves one")
		case m.Type == "tmpfs" && ro:
			// An empty read-only directory, whatever its mode: a runtime
			// hides what is there. The export's form of a carve-out that
			// did not exist yet looks the same, but an importer cannot
			// tell that the path is still missing, and a carve-out of a
			// path that exists would show its contents.
			fs.Deny = append(fs.Deny, m.Destination)
		default:
			return refuse(fmt.Sprintf("sandboxd has no mount of type %q at %s", m.Type, m.Destination))
		}
	}
	if !hostRoot {
		return &Refusal{Field: "root.path", Reason: "sandboxd runs on the host's tree, read-only: bind / read-only at / as the first mount"}
	}
	return nil
}

// within reports whether p lies within one of roots, by the rules of the
// Linux paths an OCI config holds.
func within(p string, roots []string) bool { return policy.Unix.WithinAny(p, roots) >= 0 }

func importPaths(fs *sandboxdv1.Filesystem, lx *specs.Linux, hidden []string) error {
	// What every sandbox has masked and read-only: the export's of a
	// policy with nothing in it.
	own, err := Export(Input{Argv: []string{"true"}, UID: 1, GID: 1, Root: "rootfs", Exists: func(string) (bool, bool) { return false, false }})
	if err != nil {
		return fmt.Errorf("export of the empty policy: %w", err)
	}
	masked, readOnly := own.Linux.MaskedPaths, own.Linux.ReadonlyPaths
	for _, p := range lx.MaskedPaths {
		if !slices.Contains(masked, p) && !slices.Contains(hidden, p) {
			fs.Deny = append(fs.Deny, p)
		}
	}
	for _, p := range lx.ReadonlyPaths {
		if !slices.Contains(readOnly, p) {
			fs.ReadOnly = append(fs.ReadOnly, p)
		}
	}
	return nil
}

func importResources(l *sandboxdv1.Limits, r *specs.LinuxResources) error {
	if r == nil {
		return nil
	}
	for i, d := range r.Devices {
		if d.Allow || (d.Access != "rwm" && d.Access != "") || d.Type != "" && d.Type != "a" || d.Major != nil || d.Minor != nil {
			return &Refusal{Field: fmt.Sprintf("linux.resources.devices[%d]", i), Reason: "sandboxes get the default devices only; the one device rule taken is deny all"}
		}
	}
	if m := r.Memory; m != nil && m.Limit != nil && *m.Limit > 0 {
		// Memory and swap together: the smaller of the two bounds both.
		v := *m.Limit
		if m.Swap != nil && *m.Swap > 0 && *m.Swap < v {
			v = *m.Swap
		}
		l.MemoryBytes = uint64(v)
	}
	if p := r.Pids; p != nil && p.Limit != nil && *p.Limit > 0 {
		if *p.Limit > 1<<32-1 {
			return &Refusal{Field: "linux.resources.pids.limit", Reason: "above sandboxd's largest"}
		}
		l.Pids = uint32(*p.Limit)
	}
	if c := r.CPU; c != nil && c.Quota != nil && *c.Quota > 0 {
		period := uint64(100_000)
		if c.Period != nil && *c.Period > 0 {
			period = *c.Period
		}
		// Rounded down: never more CPU than the config gives.
		millis := uint64(*c.Quota) * 1000 / period
		if millis == 0 || millis > 1<<32-1 || uint64(*c.Quota) > 1<<40 {
			return &Refusal{Field: "linux.resources.cpu.quota", Reason: "outside sandboxd's quotas (a thousandth of a CPU and up)"}
		}
		l.CpuMillis = uint32(millis)
	}
	return nil
}

// importSeccomp refuses a filter that refuses anything sandboxd's does
// not: sandboxd applies its own, and dropping a refusal would widen the
// sandbox.
func importSeccomp(sc *specs.LinuxSeccomp, netns bool) error {
	if sc == nil {
		return nil
	}
	if sc.DefaultAction != specs.ActAllow && sc.DefaultAction != specs.ActLog {
		return &Refusal{Field: "linux.seccomp.defaultAction", Reason: "sandboxd's filter allows what it does not name; a filter of allowed calls would be ignored"}
	}
	ours, err := Seccomp(netns)
	if err != nil {
		return err
	}
	deniedNames := map[string]bool{}
	for _, r := range ours.Syscalls {
		if len(r.Args) == 0 {
			for _, n := range r.Names {
				deniedNames[n] = true
			}
		}
	}
	for i, r := range sc.Syscalls {
		if r.Action == specs.ActAllow || r.Action == specs.ActLog {
			continue
		}
		if slices.ContainsFunc(ours.Syscalls, func(o specs.LinuxSyscall) bool { return sameRule(o, r) }) {
			continue
		}
		if len(r.Args) == 0 && !slices.ContainsFunc(r.Names, func(n string) bool { return !deniedNames[n] }) {
			continue
		}
		return &Refusal{Field: fmt.Sprintf("linux.seccomp.syscalls[%d]", i), Reason: "refuses calls sandboxd's filter allows, and sandboxd applies its own"}
	}
	return nil
}

func sameRule(a, b specs.LinuxSyscall) bool {
	an, bn := slices.Clone(a.Names), slices.Clone(b.Names)
	sort.Strings(an)
	sort.Strings(bn)
	return slices.Equal(an, bn) && a.Action == b.Action && reflect.DeepEqual(a.Args, b.Args)
}

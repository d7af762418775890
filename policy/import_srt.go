package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// ImportSRT converts the settings JSON of Anthropic's sandbox-runtime (srt)
// into a policy, which is validated and normalized. srt's model: everything
// is readable but filesystem.denyRead; only filesystem.allowWrite is
// writable, minus filesystem.denyWrite; the network reaches only
// network.allowedDomains, minus network.deniedDomains, on any port.
//
// Paths are resolved against opts.Home ("~") and opts.Cwd (relative ones),
// since srt resolves them where it runs. A write root's .git stays
// read-only, as srt never lets a sandbox write a repository's hooks or
// configuration; sandboxd keeps the whole directory, which is narrower.
//
// A key without an exact equivalent is a *KeyError naming it; with
// opts.Lossy it is a warning instead and the key is imported narrower:
// globs in allowWrite and allowRead are dropped, globs in denyRead and
// denyWrite widen to the literal directory above them, a write root inside
// a denyRead path is dropped, a denyRead path inside a write root is denied
// writing too, a domain sandboxd cannot name is dropped, an
// allowed domain that a denied one cuts into is dropped, and settings that
// only ever widen srt (allowUnixSockets, allowLocalBinding, ...) are
// dropped. A key ImportSRT does not know is an error even with Lossy: it
// cannot know whether dropping it widens. Keys are taken in sorted order,
// so the first error and the warnings are the same every time.
func ImportSRT(data []byte, opts ImportOptions) (*sandboxdv1.Policy, []*KeyError, error) {
	im := &importer{opts: opts}
	var top map[string]json.RawMessage
	if err := strictJSON(data, &top); err != nil {
		return nil, nil, fmt.Errorf("srt settings: %w", err)
	}
	p := Default()
	for _, k := range sortedKeys(top) {
		v := top[k]
		var err error
		switch k {
		case "filesystem":
			err = im.srtFilesystem(v, p.Filesystem)
		case "network":
			err = im.srtNetwork(v, p.Network)
		case "ignoreViolations":
			// It only silences srt's reports; sandboxd reports every
			// denial, which allows nothing more.
			im.warnings = append(im.warnings, &KeyError{Key: k, Msg: "not imported: sandboxd reports every denial"})
		case "enableWeakerNestedSandbox", "enableWeakerNetworkIsolation":
			err = im.srtFalse(k, v, "sandboxd has no weaker mode", "dropped: the sandbox stays as strong as without it")
		default:
			err = &KeyError{Key: k, Msg: "unknown srt setting"}
		}
		if err != nil {
			return nil, nil, err
		}
	}
	return im.finish(p)
}

// srtFalse accepts key when it is false, the setting's only value with an
// exact equivalent.
func (im *importer) srtFalse(key string, v json.RawMessage, msg, narrower string) error {
	var b bool
	if err := json.Unmarshal(v, &b); err != nil {
		return &KeyError{Key: key, Msg: "want true or false"}
	}
	if !b {
		return nil
	}
	return im.inexact(key, msg, narrower)
}

func (im *importer) srtFilesystem(raw json.RawMessage, fs *sandboxdv1.Filesystem) error {
	var sec map[string]json.RawMessage
	if err := strictJSON(raw, &sec); err != nil {
		return &KeyError{Key: "filesystem", Msg: err.Error()}
	}
	lists := map[string][]string{}
	for _, k := range sortedKeys(sec) {
		key := "filesystem." + k
		switch k {
		case "allowWrite", "denyWrite", "denyRead", "allowRead":
			var l []string
			if err := json.Unmarshal(sec[k], &l); err != nil {
				return &KeyError{Key: key, Msg: "want a list of paths"}
			}
			lists[k] = l
		default:
			return &KeyError{Key: key, Msg: "unknown srt filesystem setting"}
		}
	}
	for i, p := range lists["allowRead"] {
		// Under srt it reopens part of a denyRead path; sandboxd's deny
		// always wins, so without it less is readable.
		if err := im.inexact(fmt.Sprintf("filesystem.allowRead[%d]", i), fmt.Sprintf("%q: sandboxd cannot make part of a denied path readable again", p), "dropped"); err != nil {
			return err
		}
	}
	deny, err := im.srtPaths("filesystem.denyRead", lists["denyRead"], true)
	if err != nil {
		return err
	}
	readOnly, err := im.srtPaths("filesystem.denyWrite", lists["denyWrite"], true)
	if err != nil {
		return err
	}
	write, err := im.srtPaths("filesystem.allowWrite", lists["allowWrite"], false)
	if err != nil {
		return err
	}
	fs.Deny = deny
	for i, w := range write {
		if w == "" {
			continue
		}
		key := fmt.Sprintf("filesystem.allowWrite[%d]", i)
		if withinAny(w, readOnly) >= 0 {
			// denyWrite wins in srt too: the root is not writable there
			// either, and sandboxd refuses a root it could never write.
			continue
		}
		if j := withinAny(w, deny); j >= 0 {
			if err := im.inexact(key, fmt.Sprintf("%q lies within filesystem.denyRead[%d]: srt lets it be written unread, sandboxd denies both", lists["allowWrite"][i], j), "dropped"); err != nil {
				return err
			}
			continue
		}
		fs.Write = append(fs.Write, w)
	}
	for j, d := range deny {
		if withinAny(d, fs.Write) >= 0 && withinAny(d, readOnly) < 0 {
			if err := im.inexact(fmt.Sprintf("filesystem.denyRead[%d]", j), fmt.Sprintf("%q lies within a write root: srt lets it be written unread, sandboxd denies both", lists["denyRead"][j]), "denied both"); err != nil {
				return err
			}
		}
	}
	// A denyWrite path outside every write root is not writable anyway.
	fs.ReadOnly = slices.DeleteFunc(readOnly, func(r string) bool { return withinAny(r, fs.Write) < 0 })
	protectGit(fs, ".git")
	return nil
}

// srtPaths resolves a list of srt paths. A glob is inexact: when widen is
// set (deny lists), Lossy imports the literal directory above it, which
// covers all it matches; otherwise Lossy drops it, leaving "" in its place
// so that indexes still match the file.
func (im *importer) srtPaths(key string, paths []string, widen bool) ([]string, error) {
	out := make([]string, 0, len(paths))
	for i, p := range paths {
		k := fmt.Sprintf("%s[%d]", key, i)
		abs, err := im.path(k, p)
		if err != nil {
			return nil, err
		}
		if isGlob(p) && slices.Contains(strings.Split(filepath.ToSlash(p), "/"), "..") {
			// A ".." after a glob can lead above the literal directory
			// before it, and the cleaned path has lost the glob.
			return nil, &KeyError{Key: k, Msg: fmt.Sprintf("%q is a glob with a \"..\" in it; write the path out", p)}
		}
		if isGlob(p) {
			narrower := "dropped"
			if widen {
				narrower = fmt.Sprintf("imported as all of %q", globPrefix(abs))
			}
			if err := im.inexact(k, fmt.Sprintf("%q is a glob; sandboxd paths are literal", p), narrower); err != nil {
				return nil, err
			}
			if widen {
				abs = globPrefix(abs)
			} else {
				abs = ""
			}
		}
		out = append(out, abs)
	}
	return out, nil
}

func (im *importer) srtNetwork(raw json.RawMessage, n *sandboxdv1.Network) error {
	var sec map[string]json.RawMessage
	if err := strictJSON(raw, &sec); err != nil {
		return &KeyError{Key: "network", Msg: err.Error()}
	}
	var allowed, denied []string
	for _, k := range sortedKeys(sec) {
		key := "network." + k
		var err error
		switch k {
		case "allowedDomains":
			err = unmarshalList(key, sec[k], &allowed)
		case "deniedDomains":
			err = unmarshalList(key, sec[k], &denied)
		case "allowUnixSockets":
			var l []string
			if err = unmarshalList(key, sec[k], &l); err == nil && len(l) > 0 {
				err = im.inexact(key, "sandboxd lets a sandbox reach no host unix socket outside network mode HOST", "dropped")
			}
		case "allowAllUnixSockets", "allowLocalBinding":
			err = im.srtFalse(key, sec[k], "sandboxd's sandboxes bind and connect only on their own loopback and sockets", "dropped")
		default:
			err = &KeyError{Key: key, Msg: "unknown srt network setting"}
		}
		if err != nil {
			return err
		}
	}
	for i, d := range allowed {
		key := fmt.Sprintf("network.allowedDomains[%d]", i)
		if msg := checkHost(d); msg != "" {
			if err := im.inexact(key, msg, "dropped"); err != nil {
				return err
			}
			continue
		}
		a := &sandboxdv1.NetworkAllow{Host: d}
		cut := false
		for j, x := range denied {
			switch {
			case MatchHost(x, d):
				// Denied as a whole: srt never reaches it either.
				cut = true
			case MatchHost(d, x):
				if err := im.inexact(key, fmt.Sprintf("%q admits network.deniedDomains[%d] %q, and sandboxd cannot take a name out of an allowed pattern", d, j, x), "dropped"); err != nil {
					return err
				}
				cut = true
			}
		}
		if !cut {
			n.Allow = append(n.Allow, a)
		}
	}
	if len(n.Allow) > 0 {
		n.Mode = sandboxdv1.Network_ALLOWLIST
	}
	return nil
}

func unmarshalList(key string, raw json.RawMessage, l *[]string) error {
	if err := json.Unmarshal(raw, l); err != nil {
		return &KeyError{Key: key, Msg: "want a list of strings"}
	}
	return nil
}

// strictJSON decodes one JSON value into v, refusing trailing data.
// Numbers stay as written (json.Number in an any): a uint64 limit must
// not pass through a float.
func strictJSON(data []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		return err
	}
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		return errors.New("data after the JSON object")
	}
	return nil
}

// sortedKeys returns m's keys sorted, so that the first error and the
// warnings come in the same order every time.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// DecodeFile parses a policy file as people write one, the way the
// command-line flags read: it is Decode, except that filesystem.read and
// network.mode may also be spelt as the flags spell them, in any case
// ("none", "allowlist", "listed"), and that paths may be "~", "~/..." (under
// home) or relative (to cwd), resolved here, where the file is read, since
// the daemon knows neither. home and cwd must be absolute when the file uses
// them; an error names the field of a path that needs what is unknown. The
// result is validated and not normalized.
func DecodeFile(data []byte, home, cwd string) (*sandboxdv1.Policy, error) {
	var doc any
	if err := strictJSON(data, &doc); err != nil {
		return nil, fmt.Errorf("decode policy: %w", err)
	}
	if top, ok := doc.(map[string]any); ok {
		upperEnum(top, "filesystem", "read", sandboxdv1.Filesystem_Read_value)
		upperEnum(top, "network", "mode", sandboxdv1.Network_Mode_value)
	}
	canon, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("decode policy: %w", err)
	}
	p := &sandboxdv1.Policy{}
	if err := protojson.Unmarshal(canon, p); err != nil {
		return nil, fmt.Errorf("decode policy: %w", err)
	}
	if fs := p.GetFilesystem(); fs != nil {
		im := &importer{opts: ImportOptions{Home: home, Cwd: cwd}}
		for _, l := range []struct {
			field string
			paths []string
		}{
			{FieldFilesystemReadRoots, fs.ReadRoots},
			{FieldFilesystemWrite, fs.Write},
			{FieldFilesystemReadOnly, fs.ReadOnly},
			{FieldFilesystemDeny, fs.Deny},
			{FieldFilesystemLayer, fs.Layer},
		} {
			for i, path := range l.paths {
				if path == "" {
					continue // Validate says it is empty, with the field.
				}
				field := fmt.Sprintf("%s[%d]", l.field, i)
				abs, err := im.path(field, path)
				if err != nil {
					var ke *KeyError
					if errors.As(err, &ke) {
						return nil, &FieldError{Field: ke.Key, Msg: ke.Msg}
					}
					return nil, err
				}
				l.paths[i] = abs
			}
		}
	}
	if err := Validate(p); err != nil {
		return nil, err
	}
	return p, nil
}

// upperEnum rewrites doc[msg][field] to the enum value's name when it is a
// string that names one in another case.
func upperEnum(doc map[string]any, msg, field string, values map[string]int32) {
	m, ok := doc[msg].(map[string]any)
	if !ok {
		return
	}
	s, ok := m[field].(string)
	if !ok {
		return
	}
	if _, known := values[strings.ToUpper(s)]; known {
		m[field] = strings.ToUpper(s)
	}
}

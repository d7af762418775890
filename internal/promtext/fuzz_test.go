package promtext

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzParse checks that Parse never panics and that what it accepts holds
// together: every family typed, every sample named after its family.
func FuzzParse(f *testing.F) {
	var b bytes.Buffer
	if _, err := daemonLike().WriteTo(&b); err != nil {
		f.Fatal(err)
	}
	f.Add(b.Bytes())
	f.Add([]byte(goodHistogram))
	f.Add([]byte("# TYPE a gauge\na{x=\"\\\\\\\"\\n\",} -Inf 1\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		fams, err := Parse(bytes.NewReader(in))
		if err != nil {
			return
		}
		for name, fam := range fams {
			if fam.Name != name {
				t.Errorf("family %q stored under %q", fam.Name, name)
			}
			switch fam.Type {
			case "counter", "gauge", "histogram", "summary", "untyped":
			default:
				t.Errorf("family %s has type %q", name, fam.Type)
			}
			for _, s := range fam.Samples {
				if !strings.HasPrefix(s.Name, name) {
					t.Errorf("sample %s in family %s", s.Name, name)
				}
			}
		}
	})
}

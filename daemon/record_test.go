package daemon

import (
	"reflect"
	"testing"
)

// A session's record is kept for as long as the session lives, idle or
// not, and a little after: it keeps the caller's quota key, not the
// caller (80 bytes, and a non-root caller's groups), which only the
// session's announcement reports.
func TestASessionRecordKeepsNoCaller(t *testing.T) {
	caller := reflect.TypeFor[Caller]()
	rt := reflect.TypeFor[session]()
	for i := range rt.NumField() {
		f := rt.Field(i)
		if f.Type == caller || f.Type == reflect.PointerTo(caller) {
			t.Errorf("session.%s keeps the caller", f.Name)
		}
	}
}

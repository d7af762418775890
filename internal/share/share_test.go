package share

import (
	"runtime"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/wrapperspb"
)

type value struct{ s string }

// add is what a caller of Get passes: v, noted with its string.
func add(v *value) func() (*value, string) {
	return func() (*value, string) { return v, "note " + v.s }
}

func TestEqualKeysShareAValue(t *testing.T) {
	var tab Table[value]
	a, note := tab.Get([]byte("a"), add(&value{"a"}))
	if note != "note a" {
		t.Errorf("the note of a new value is %q", note)
	}
	b, note := tab.Get([]byte("a"), add(&value{"other"}))
	if b != a || note != "note a" {
		t.Errorf("a second value of key a was kept beside the first: %+v, %q", b, note)
	}
	if c, note := tab.Get([]byte("c"), add(&value{"c"})); c == a || c.s != "c" || note != "note c" {
		t.Errorf("key c got %+v, %q", c, note)
	}
	runtime.KeepAlive(a)
}

func TestFindingAValueMakesNothing(t *testing.T) {
	var tab Table[value]
	kept, _ := tab.Get([]byte("kept"), add(&value{"kept"}))
	key := []byte("kept")
	made := false
	fresh := func() (*value, string) { made = true; return &value{"new"}, "" }
	if n := testing.AllocsPerRun(100, func() { tab.Get(key, fresh) }); n != 0 || made {
		t.Errorf("finding a value in use allocated %v times (made a new one: %v)", n, made)
	}
	runtime.KeepAlive(kept)
}

func TestAValueNoOneUsesIsForgotten(t *testing.T) {
	var tab Table[value]
	tab.Get([]byte("gone"), add(&value{"gone"}))
	for deadline := time.Now().Add(10 * time.Second); tab.Len() != 0; {
		if time.Now().After(deadline) {
			t.Fatalf("the table still holds %d values after nothing used them", tab.Len())
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	if v, note := tab.Get([]byte("gone"), add(&value{"again"})); v.s != "again" || note != "note again" {
		t.Errorf("a value of a forgotten key came back: %+v, %q", v, note)
	}
}

func TestMessagesShareByEncoding(t *testing.T) {
	var tab Table[wrapperspb.StringValue]
	calls := 0
	note := func(m *wrapperspb.StringValue) string { calls++; return "n:" + m.GetValue() }
	a, na := Message(&tab, wrapperspb.String("x"), note)
	b, nb := Message(&tab, wrapperspb.String("x"), note)
	if a != b || na != "n:x" || nb != "n:x" || calls != 1 {
		t.Errorf("equal messages: %p %q, %p %q, note made %d times; want one value, its note made once", a, na, b, nb, calls)
	}
	if c, nc := Message(&tab, wrapperspb.String("y"), nil); c == a || c.GetValue() != "y" || nc != "" {
		t.Errorf("another message got %v, %q", c, nc)
	}
	runtime.KeepAlive(a)
}

package share

import (
	"runtime"
	"testing"
	"time"
)

type value struct{ s string }

func TestEqualKeysShareAValue(t *testing.T) {
	var tab Table[value]
	a := tab.Get("a", &value{"a"})
	if b := tab.Get("a", &value{"a"}); b != a {
		t.Errorf("a second value of key a was kept beside the first")
	}
	if c := tab.Get("c", &value{"c"}); c == a || c.s != "c" {
		t.Errorf("key c got %+v", c)
	}
	runtime.KeepAlive(a)
}

func TestAValueNoOneUsesIsForgotten(t *testing.T) {
	var tab Table[value]
	tab.Get("gone", &value{"gone"})
	for deadline := time.Now().Add(10 * time.Second); tab.Len() != 0; {
		if time.Now().After(deadline) {
			t.Fatalf("the table still holds %d values after nothing used them", tab.Len())
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	if v := tab.Get("gone", &value{"again"}); v.s != "again" {
		t.Errorf("a value of a forgotten key came back: %+v", v)
	}
}

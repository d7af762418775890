package launcherlinux

import (
	"reflect"
	"strconv"
	"testing"
)

// TestWriteModelKeySpellsOutEveryField changes each field of a model in
// turn, and each list's length, and requires another key: two models with
// one key are one shared model, and a session would be judged against
// another view's. The fields are found by reflection, so a field added to
// the model without being added to the key fails here.
func TestWriteModelKeySpellsOutEveryField(t *testing.T) {
	base := func() *WriteModel {
		return &WriteModel{
			Mounts: []ModelMount{
				{Path: "/a", Mask: maskedDir, Field: "filesystem.read_only"},
				{Path: "/b", ReadOnly: true, Field: "filesystem.write"},
			},
			HandledFS: 0x3,
			Rules:     []LandlockRule{{Path: "/w", Access: 0x1}},
			ReadOnly:  []string{"/r"},
			Deny:      []string{"/d"},
			Terminal:  "/dev/pts/0",
		}
	}
	want := string(base().appendKey(nil))
	changes := 0
	for i := 0; ; i++ {
		m := base()
		what, ok := changeNth(reflect.ValueOf(m).Elem(), "model", i)
		if !ok {
			break
		}
		changes++
		if got := string(m.appendKey(nil)); got == want {
			t.Errorf("changing %s leaves the key as it was: %q", what, got)
		}
	}
	if changes < 16 {
		t.Fatalf("only %d changes made: the walk over the model's fields is broken", changes)
	}
	// The same path in another list.
	m := base()
	m.ReadOnly, m.Deny = nil, []string{"/r", "/d"}
	if string(m.appendKey(nil)) == want {
		t.Errorf("moving a read_only path to deny leaves the key as it was")
	}
}

// changeNth makes the n-th change the walk over v finds (a string, bool or
// integer changed, or a list one element longer or shorter) and names it;
// false when v offers fewer than n+1 changes.
func changeNth(v reflect.Value, name string, n int) (string, bool) {
	left := n
	var walk func(v reflect.Value, name string) (string, bool)
	walk = func(v reflect.Value, name string) (string, bool) {
		switch v.Kind() {
		case reflect.Struct:
			for i := 0; i < v.NumField(); i++ {
				if what, ok := walk(v.Field(i), name+"."+v.Type().Field(i).Name); ok {
					return what, true
				}
			}
			return "", false
		case reflect.Slice:
			if left == 0 {
				v.Set(reflect.Append(v, reflect.New(v.Type().Elem()).Elem()))
				return name + " one longer", true
			}
			left--
			if v.Len() > 0 {
				if left == 0 {
					v.Set(v.Slice(0, v.Len()-1))
					return name + " one shorter", true
				}
				left--
			}
			for i := 0; i < v.Len(); i++ {
				if what, ok := walk(v.Index(i), name+"["+strconv.Itoa(i)+"]"); ok {
					return what, true
				}
			}
			return "", false
		}
		if left > 0 {
			left--
			return "", false
		}
		switch v.Kind() {
		case reflect.String:
			v.SetString(v.String() + "x")
		case reflect.Bool:
			v.SetBool(!v.Bool())
		case reflect.Uint64, reflect.Uint32, reflect.Uint:
			v.SetUint(v.Uint() + 1)
		case reflect.Int, reflect.Int64, reflect.Int32:
			v.SetInt(v.Int() + 1)
		default:
			panic("changeNth: the model has a " + v.Kind().String() + " field the key test cannot change: " + name)
		}
		return name, true
	}
	return walk(v, name)
}

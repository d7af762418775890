package launcherlinux

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/sandboxd/sandboxd/launcher_linux/sandboxinit"
)

// quickReport reads back what json.Marshal writes of sandboxinit.Message
// for every line it decodes (the field names, their order, their
// omission when zero), so that a change to the Message's encoding that
// the decoder missed fails here instead of sending every launch through
// encoding/json, or worse, reading a field as another.
func TestQuickReportReadsWhatJSONMarshalWrites(t *testing.T) {
	ints := []int{0, 1, -1, 9, 126, 255, math.MaxInt32, math.MinInt32}
	msgs := []sandboxinit.Message{{Type: "started"}}
	for _, code := range ints {
		for _, sig := range ints {
			msgs = append(msgs, sandboxinit.Message{Type: "exit", Code: code, Signal: sig})
		}
	}
	for _, m := range msgs {
		line, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := quickReport(append(line, '\n'))
		if !ok || got != m {
			t.Errorf("%s: quickReport %+v, %v; want %+v", line, got, ok, m)
		}
	}
}

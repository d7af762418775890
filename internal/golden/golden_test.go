package golden

import "testing"

func TestFirstDifference(t *testing.T) {
	for _, c := range []struct {
		a, b         string
		line         int
		aLine, bLine string
	}{
		{"x\ny\nz\n", "x\nY\nz\n", 2, "y", "Y"},
		{"x\ny\n", "x\ny\nz\n", 3, "", "z"},
		{"x\ny", "x\ny\n", 3, "(end)", ""},
	} {
		line, a, b := firstDifference([]byte(c.a), []byte(c.b))
		if line != c.line || a != c.aLine || b != c.bLine {
			t.Errorf("firstDifference(%q, %q) = %d %q %q, want %d %q %q", c.a, c.b, line, a, b, c.line, c.aLine, c.bLine)
		}
	}
}

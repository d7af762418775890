package promtext

import (
	"math"
	"strings"
	"testing"
)

const goodHistogram = `# TYPE h histogram
h_bucket{le="1"} 1
h_bucket{le="+Inf"} 2
h_sum 3
h_count 2
`

func TestParseRejects(t *testing.T) {
	for _, tc := range []struct{ name, in string }{
		{"no final newline", "# TYPE a counter\na 1"},
		{"sample without TYPE", "a 1\n"},
		{"sample after HELP only", "# HELP a x\na 1\n"},
		{"HELP without TYPE", "# HELP a x\n"},
		{"sample of another family's TYPE", "# TYPE a counter\nb 1\n"},
		{"invalid name in TYPE", "# TYPE 1a counter\n"},
		{"TYPE without name", "# TYPE\n"},
		{"unknown type", "# TYPE a histogramm\n"},
		{"words after type", "# TYPE a counter extra\n"},
		{"second TYPE", "# TYPE a counter\n# TYPE a counter\n"},
		{"second HELP", "# HELP a x\n# HELP a y\n# TYPE a counter\n"},
		{"unknown HELP escape", "# HELP a tab\\t\n# TYPE a counter\n"},
		{"trailing backslash in HELP", "# HELP a x\\\n# TYPE a counter\n"},
		{"CRLF", "# TYPE a counter\r\na 1\r\n"},
		{"invalid UTF-8", "# TYPE a gauge\na{x=\"\xff\"} 1\n"},
		{"invalid metric name", "# TYPE a gauge\n-a 1\n"},
		{"no value", "# TYPE a gauge\na\n"},
		{"no value after labels", "# TYPE a gauge\na{}\n"},
		{"no blank before value", "# TYPE a gauge\na{}1\n"},
		{"value not a number", "# TYPE a gauge\na one\n"},
		{"value out of range", "# TYPE a gauge\na 1e999\n"},
		{"timestamp not an integer", "# TYPE a gauge\na 1 1.5\n"},
		{"words after timestamp", "# TYPE a gauge\na 1 2 3\n"},
		{"invalid label name", "# TYPE a gauge\na{1x=\"v\"} 1\n"},
		{"empty label name", "# TYPE a gauge\na{=\"v\"} 1\n"},
		{"leading comma", "# TYPE a gauge\na{,} 1\n"},
		{"repeated label", "# TYPE a gauge\na{x=\"1\",x=\"2\"} 1\n"},
		{"label without =", "# TYPE a gauge\na{x \"1\"} 1\n"},
		{"unquoted label value", "# TYPE a gauge\na{x=1} 1\n"},
		{"unterminated label value", "# TYPE a gauge\na{x=\"1} 1\n"},
		{"unknown label escape", "# TYPE a gauge\na{x=\"\\t\"} 1\n"},
		{"missing comma", "# TYPE a gauge\na{x=\"1\" y=\"2\"} 1\n"},
		{"unclosed labels", "# TYPE a gauge\na{x=\"1\" 1\n"},
		{"duplicate series", "# TYPE a gauge\na 1\na 2\n"},
		{"duplicate series, labels reordered", "# TYPE a gauge\na{x=\"1\",y=\"2\"} 1\na{y=\"2\",x=\"1\"} 1\n"},
		{"negative counter", "# TYPE a counter\na -1\n"},
		{"family split in two groups", "# TYPE a gauge\na{x=\"1\"} 1\n# TYPE b gauge\nb 1\na{x=\"2\"} 1\n"},
		{"TYPE of an ended family", "# HELP a x\n# TYPE b gauge\n# TYPE a gauge\n"},
		{"TYPE after samples", "# TYPE a gauge\na 1\n# TYPE a gauge\n"},
		{"histogram sample name taken", "# TYPE h histogram\n# TYPE h_count counter\n"},
		{"name taken by histogram later", "# TYPE h_sum gauge\n# TYPE h histogram\n"},
		{"HELP for a histogram sample name", "# TYPE h histogram\n# HELP h_sum x\n"},
		{"HELP-only family claimed by histogram", "# HELP h_sum x\n# TYPE h histogram\n"},
		{"bare histogram sample", "# TYPE h histogram\nh 1\n" + goodHistogram[len("# TYPE h histogram\n"):]},
		{"bucket without le", "# TYPE h histogram\nh_bucket 1\nh_sum 1\nh_count 1\n"},
		{"le not a number", "# TYPE h histogram\nh_bucket{le=\"x\"} 1\nh_sum 1\nh_count 1\n"},
		{"le NaN", "# TYPE h histogram\nh_bucket{le=\"NaN\"} 1\nh_sum 1\nh_count 1\n"},
		{"le on _sum", "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 1\nh_sum{le=\"1\"} 1\nh_count 1\n"},
		{"buckets out of order", "# TYPE h histogram\nh_bucket{le=\"2\"} 1\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n"},
		{"non-cumulative buckets", "# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"2\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 2\n"},
		{"fractional bucket", "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 1.5\nh_sum 1\nh_count 1.5\n"},
		{"negative count", "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 0\nh_sum 1\nh_count -1\n"},
		{"no +Inf bucket", "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_sum 1\nh_count 1\n"},
		{"_count differs from +Inf", "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 3\n"},
		{"no _count", "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_sum 1\n"},
		{"no _sum", "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_count 2\n"},
		{"second series lacks +Inf", goodHistogram + "h_bucket{x=\"1\",le=\"1\"} 1\nh_sum{x=\"1\"} 1\nh_count{x=\"1\"} 1\n"},
		{"summary without quantile", "# TYPE s summary\ns 1\ns_sum 1\ns_count 1\n"},
		{"quantile out of range", "# TYPE s summary\ns{quantile=\"2\"} 1\ns_sum 1\ns_count 1\n"},
		{"summary without _count", "# TYPE s summary\ns{quantile=\"0.5\"} 1\ns_sum 1\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if fams, err := Parse(strings.NewReader(tc.in)); err == nil {
				t.Errorf("accepted %q as %v", tc.in, fams)
			}
		})
	}
}

func TestParseAccepts(t *testing.T) {
	in := `# a comment that is neither HELP nor TYPE

  # HELP g A gauge,	with \\ and\nlines.
# TYPE g gauge
g{ a = "1" , b="\"x\"", } +Inf 1700000000000
g{a="2"} NaN
g -0.5e-3
# TYPE u untyped
u 1
` + goodHistogram + `# TYPE s summary
s{quantile="0.5"} 0.2
s{quantile="0.99"} 1
s_sum 10
s_count 30
#TYPE c counter
c	0
`
	fams := mustParse(t, in)
	if len(fams) != 5 {
		t.Fatalf("%d families, want 5", len(fams))
	}
	g := fams["g"]
	if g.Help != "A gauge,\twith \\ and\nlines." {
		t.Errorf("help %q", g.Help)
	}
	if len(g.Samples) != 3 {
		t.Fatalf("gauge samples %+v", g.Samples)
	}
	first := g.Samples[0]
	if first.Labels["a"] != "1" || first.Labels["b"] != `"x"` || !math.IsInf(first.Value, 1) ||
		!first.HasTimestamp || first.Timestamp != 1700000000000 {
		t.Errorf("first gauge sample %+v", first)
	}
	if !math.IsNaN(g.Samples[1].Value) || g.Samples[2].Value != -0.0005 || g.Samples[2].HasTimestamp {
		t.Errorf("gauge samples %+v", g.Samples)
	}
	if fams["c"].Type != "counter" || fams["h"].Type != "histogram" || len(fams["s"].Samples) != 4 {
		t.Errorf("families %+v %+v %+v", fams["c"], fams["h"], fams["s"])
	}
	if len(mustParse(t, "")) != 0 {
		t.Error("empty input has families")
	}
}

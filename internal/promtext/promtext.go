// Package promtext serves metrics in the Prometheus text exposition format,
// version 0.0.4, and parses that format strictly so tests can check what is
// served. It covers what the daemon exports (counters, gauges, gauges
// computed at scrape time, histograms) and nothing else: no summaries on
// the writing side, no timestamps, no OpenMetrics.
package promtext

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// ContentType is the media type of the text format this package writes.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// Registry holds metric families and writes them in registration order.
// It is safe for concurrent use; registering is meant for start-up and
// panics on a name that is invalid or taken, since that is a programming
// error.
type Registry struct {
	mu       sync.Mutex
	families []*family
	// owner maps every sample name a family can emit (a histogram's
	// _bucket, _sum and _count too) to it, so no two families collide.
	owner map[string]string
}

type family struct {
	name, help, typ string
	labelNames      []string
	write           func(b *bytes.Buffer) error
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{owner: map[string]string{}}
}

func (r *Registry) register(f *family, sampleNames ...string) {
	if !validMetricName(f.name) {
		panic(fmt.Sprintf("promtext: invalid metric name %q", f.name))
	}
	for i, l := range f.labelNames {
		if !validLabelName(l) || strings.HasPrefix(l, "__") {
			panic(fmt.Sprintf("promtext: %s: invalid label name %q", f.name, l))
		}
		if slices.Contains(f.labelNames[:i], l) {
			panic(fmt.Sprintf("promtext: %s: label %q repeated", f.name, l))
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range sampleNames {
		if other, ok := r.owner[s]; ok {
			panic(fmt.Sprintf("promtext: %s: sample name %s already used by %s", f.name, s, other))
		}
	}
	for _, s := range sampleNames {
		r.owner[s] = f.name
	}
	r.families = append(r.families, f)
}

// Counter registers a counter family. Its series appear once With creates
// them; a family without labels has its single series from the start.
func (r *Registry) Counter(name, help string, labelNames ...string) *CounterVec {
	v := &CounterVec{newVec(name, labelNames, func() *Counter { return new(Counter) })}
	r.register(&family{name: name, help: help, typ: "counter", labelNames: v.labelNames,
		write: func(b *bytes.Buffer) error {
			for _, s := range v.snapshot() {
				writeSample(b, name, v.labelNames, s.labelValues, "", "", s.m.Value())
			}
			return nil
		}}, name)
	return v
}

// Gauge registers a gauge family that the daemon sets as things change.
func (r *Registry) Gauge(name, help string, labelNames ...string) *GaugeVec {
	v := &GaugeVec{newVec(name, labelNames, func() *Gauge { return new(Gauge) })}
	r.register(&family{name: name, help: help, typ: "gauge", labelNames: v.labelNames,
		write: func(b *bytes.Buffer) error {
			for _, s := range v.snapshot() {
				writeSample(b, name, v.labelNames, s.labelValues, "", "", s.m.Value())
			}
			return nil
		}}, name)
	return v
}

// GaugeValue is one series of a GaugeFunc: label values in the order of the
// family's label names, and the value.
type GaugeValue struct {
	LabelValues []string
	Value       float64
}

// GaugeFunc registers a gauge family computed at scrape time by collect, for
// values that are cheaper to count when asked than to track (sessions by
// state). collect runs on every scrape, concurrently with everything else;
// a series it returns twice, or with the wrong number of label values,
// fails the scrape.
func (r *Registry) GaugeFunc(name, help string, labelNames []string, collect func() []GaugeValue) {
	labelNames = slices.Clone(labelNames)
	r.register(&family{name: name, help: help, typ: "gauge", labelNames: labelNames,
		write: func(b *bytes.Buffer) error {
			values := collect()
			type series struct {
				labelValues []string
				value       float64
			}
			out := make([]series, 0, len(values))
			for _, v := range values {
				if len(v.LabelValues) != len(labelNames) {
					return fmt.Errorf("collected %d label values %q for label names %q", len(v.LabelValues), v.LabelValues, labelNames)
				}
				out = append(out, series{validUTF8(v.LabelValues), v.Value})
			}
			slices.SortFunc(out, func(a, b series) int { return slices.Compare(a.labelValues, b.labelValues) })
			for i := 1; i < len(out); i++ {
				if slices.Equal(out[i-1].labelValues, out[i].labelValues) {
					return fmt.Errorf("collected series %q twice", out[i].labelValues)
				}
			}
			for _, s := range out {
				writeSample(b, name, labelNames, s.labelValues, "", "", s.value)
			}
			return nil
		}}, name)
}

// Histogram registers a histogram family with the given upper bounds, which
// must increase strictly; the +Inf bucket is implicit.
func (r *Registry) Histogram(name, help string, buckets []float64, labelNames ...string) *HistogramVec {
	upper := slices.Clone(buckets)
	if n := len(upper); n > 0 && math.IsInf(upper[n-1], 1) {
		upper = upper[:n-1]
	}
	for i, u := range upper {
		if math.IsNaN(u) || i > 0 && u <= upper[i-1] {
			panic(fmt.Sprintf("promtext: %s: buckets %v do not increase strictly", name, buckets))
		}
	}
	if slices.Contains(labelNames, "le") {
		panic(fmt.Sprintf("promtext: %s: histogram label le is reserved", name))
	}
	v := &HistogramVec{newVec(name, labelNames, func() *Histogram {
		return &Histogram{upper: upper, counts: make([]uint64, len(upper)+1)}
	})}
	bounds := make([]string, len(upper)+1)
	for i, u := range upper {
		bounds[i] = formatFloat(u)
	}
	bounds[len(upper)] = "+Inf"
	r.register(&family{name: name, help: help, typ: "histogram", labelNames: v.labelNames,
		write: func(b *bytes.Buffer) error {
			for _, s := range v.snapshot() {
				counts, sum := s.m.snapshot()
				var cum uint64
				for i, c := range counts {
					cum += c
					writeSample(b, name+"_bucket", v.labelNames, s.labelValues, "le", bounds[i], float64(cum))
				}
				writeSample(b, name+"_sum", v.labelNames, s.labelValues, "", "", sum)
				writeSample(b, name+"_count", v.labelNames, s.labelValues, "", "", float64(cum))
			}
			return nil
		}}, name, name+"_bucket", name+"_sum", name+"_count")
	return v
}

// WriteTo writes every family in registration order, series sorted by label
// values. On error it writes nothing.
func (r *Registry) WriteTo(w io.Writer) (int64, error) {
	b, err := r.render()
	if err != nil {
		return 0, err
	}
	n, err := w.Write(b)
	if err != nil {
		return int64(n), fmt.Errorf("promtext: write: %w", err)
	}
	return int64(n), nil
}

func (r *Registry) render() ([]byte, error) {
	r.mu.Lock()
	families := slices.Clone(r.families)
	r.mu.Unlock()
	var b bytes.Buffer
	for _, f := range families {
		if f.help != "" {
			fmt.Fprintf(&b, "# HELP %s %s\n", f.name, helpEscaper.Replace(f.help))
		}
		fmt.Fprintf(&b, "# TYPE %s %s\n", f.name, f.typ)
		if err := f.write(&b); err != nil {
			return nil, fmt.Errorf("promtext: %s: %w", f.name, err)
		}
	}
	return b.Bytes(), nil
}

// Handler serves the registry to GET and HEAD requests. A scrape that fails
// gets a 500 rather than a partial page, which Prometheus would take as
// every missing series gone.
func (r *Registry) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		b, err := r.render()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", ContentType)
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		if req.Method == http.MethodHead {
			return
		}
		// A failed write means the scraper went away; there is no one to tell.
		w.Write(b)
	})
}

// writeSample writes one line; extraName/extraValue carry a histogram's le.
func writeSample(b *bytes.Buffer, name string, labelNames, labelValues []string, extraName, extraValue string, v float64) {
	b.WriteString(name)
	if len(labelNames) > 0 || extraName != "" {
		b.WriteByte('{')
		for i, l := range labelNames {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(l)
			b.WriteString(`="`)
			labelEscaper.WriteString(b, labelValues[i])
			b.WriteByte('"')
		}
		if extraName != "" {
			if len(labelNames) > 0 {
				b.WriteByte(',')
			}
			b.WriteString(extraName)
			b.WriteString(`="`)
			b.WriteString(extraValue)
			b.WriteByte('"')
		}
		b.WriteByte('}')
	}
	b.WriteByte(' ')
	b.WriteString(formatFloat(v))
	b.WriteByte('\n')
}

var (
	labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
)

// formatFloat writes integers up to 2^53 in plain digits (a count of
// 1000000 reads as such, not 1e+06) and everything else in the shortest
// form that parses back to the same float.
func formatFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	case v == math.Trunc(v) && math.Abs(v) <= 1<<53:
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

func validMetricName(s string) bool {
	return validName(s, true)
}

func validLabelName(s string) bool {
	return validName(s, false)
}

func validName(s string, colon bool) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' ||
			i > 0 && '0' <= c && c <= '9' || colon && c == ':'
		if !ok {
			return false
		}
	}
	return true
}

// validUTF8 replaces invalid UTF-8 in label values, which the format does
// not allow, so a stray byte from a caller cannot break the whole page.
func validUTF8(values []string) []string {
	cloned := false
	for i, v := range values {
		if !utf8.ValidString(v) {
			if !cloned {
				// The caller's slice (maybe With's variadic arguments) stays as given.
				values, cloned = slices.Clone(values), true
			}
			values[i] = strings.ToValidUTF8(v, "\uFFFD")
		}
	}
	return values
}

// vec holds the series of one family by label values.
type vec[T any] struct {
	name       string
	labelNames []string
	newSeries  func() *T

	mu     sync.RWMutex
	series map[string]*series[T]
}

type series[T any] struct {
	labelValues []string
	m           *T
}

func newVec[T any](name string, labelNames []string, newSeries func() *T) *vec[T] {
	v := &vec[T]{name: name, labelNames: slices.Clone(labelNames), newSeries: newSeries, series: map[string]*series[T]{}}
	if len(labelNames) == 0 {
		v.series[""] = &series[T]{m: newSeries()}
	}
	return v
}

// with returns the series for labelValues, creating it on first use. Callers
// on a hot path keep the result rather than calling With each time.
func (v *vec[T]) with(labelValues []string) *T {
	if len(labelValues) != len(v.labelNames) {
		panic(fmt.Sprintf("promtext: %s: %d label values %q for label names %q", v.name, len(labelValues), labelValues, v.labelNames))
	}
	labelValues = validUTF8(labelValues)
	// 0xff never occurs in UTF-8, so the key is unambiguous.
	key := strings.Join(labelValues, "\xff")
	v.mu.RLock()
	s := v.series[key]
	v.mu.RUnlock()
	if s != nil {
		return s.m
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if s = v.series[key]; s == nil {
		s = &series[T]{labelValues: slices.Clone(labelValues), m: v.newSeries()}
		v.series[key] = s
	}
	return s.m
}

func (v *vec[T]) snapshot() []*series[T] {
	v.mu.RLock()
	out := make([]*series[T], 0, len(v.series))
	for _, s := range v.series {
		out = append(out, s)
	}
	v.mu.RUnlock()
	slices.SortFunc(out, func(a, b *series[T]) int { return slices.Compare(a.labelValues, b.labelValues) })
	return out
}

// CounterVec is a counter family; With picks a series by label values.
type CounterVec struct{ *vec[Counter] }

// With returns the series with these label values, in label-name order. It
// panics if their number is wrong.
func (v *CounterVec) With(labelValues ...string) *Counter { return v.with(labelValues) }

// Counter is a value that only goes up.
type Counter struct{ bits atomic.Uint64 }

// Inc adds 1.
func (c *Counter) Inc() { c.Add(1) }

// Add adds v, which must not be negative: a counter that goes down reads as
// a restart to Prometheus.
func (c *Counter) Add(v float64) {
	if v < 0 {
		panic(fmt.Sprintf("promtext: counter decreased by %v", v))
	}
	addFloat(&c.bits, v)
}

// Value returns the current value.
func (c *Counter) Value() float64 { return math.Float64frombits(c.bits.Load()) }

// GaugeVec is a gauge family; With picks a series by label values.
type GaugeVec struct{ *vec[Gauge] }

// With returns the series with these label values, in label-name order. It
// panics if their number is wrong.
func (v *GaugeVec) With(labelValues ...string) *Gauge { return v.with(labelValues) }

// Gauge is a value that goes up and down.
type Gauge struct{ bits atomic.Uint64 }

// Set sets the value.
func (g *Gauge) Set(v float64) { g.bits.Store(math.Float64bits(v)) }

// Add adds v, which may be negative.
func (g *Gauge) Add(v float64) { addFloat(&g.bits, v) }

// Inc adds 1.
func (g *Gauge) Inc() { g.Add(1) }

// Dec subtracts 1.
func (g *Gauge) Dec() { g.Add(-1) }

// Value returns the current value.
func (g *Gauge) Value() float64 { return math.Float64frombits(g.bits.Load()) }

func addFloat(bits *atomic.Uint64, v float64) {
	for {
		old := bits.Load()
		if bits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

// HistogramVec is a histogram family; With picks a series by label values.
type HistogramVec struct{ *vec[Histogram] }

// With returns the series with these label values, in label-name order. It
// panics if their number is wrong.
func (v *HistogramVec) With(labelValues ...string) *Histogram { return v.with(labelValues) }

// Histogram counts observations into buckets.
type Histogram struct {
	upper []float64 // shared by the family's series, never written

	// A mutex rather than atomics: a scrape must see buckets, sum and count
	// from the same instant, or _count would disagree with the +Inf bucket.
	mu     sync.Mutex
	counts []uint64 // per bucket, not cumulative; the last is +Inf
	sum    float64
}

// Observe records v in the first bucket whose upper bound is at least v
// (NaN lands in +Inf only).
func (h *Histogram) Observe(v float64) {
	i := sort.SearchFloat64s(h.upper, v)
	h.mu.Lock()
	h.counts[i]++
	h.sum += v
	h.mu.Unlock()
}

func (h *Histogram) snapshot() ([]uint64, float64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.counts), h.sum
}

package promtext

import (
	"bytes"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

func scrape(t *testing.T, r *Registry) string {
	t.Helper()
	var b strings.Builder
	n, err := r.WriteTo(&b)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(b.Len()) {
		t.Errorf("WriteTo reported %d bytes, wrote %d", n, b.Len())
	}
	return b.String()
}

func mustParse(t *testing.T, text string) map[string]*Family {
	t.Helper()
	fams, err := Parse(strings.NewReader(text))
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	return fams
}

// daemonLike registers what the daemon exports, in its shape.
func daemonLike() *Registry {
	r := NewRegistry()
	launches := r.Counter("sandboxd_launches_total", "Sessions launched.")
	refusals := r.Counter("sandboxd_refusals_total", "Launches refused, by policy field.", "field")
	r.GaugeFunc("sandboxd_sessions", "Live sessions by state.", []string{"state"}, func() []GaugeValue {
		return []GaugeValue{{[]string{"running"}, 2}, {[]string{"exited"}, 1}}
	})
	latency := r.Histogram("sandboxd_launch_seconds", "Launch latency.", []float64{0.25, 1, 2})
	r.Counter("sandboxd_denials_total", "Denials, by policy field.", "field")

	launches.With().Add(3)
	refusals.With("network.allowlist").Inc()
	refusals.With("filesystem.write").Add(2)
	for _, v := range []float64{0.25, 0.5, 4} {
		latency.With().Observe(v)
	}
	return r
}

func TestWriteToGolden(t *testing.T) {
	want := `# HELP sandboxd_launches_total Sessions launched.
# TYPE sandboxd_launches_total counter
sandboxd_launches_total 3
# HELP sandboxd_refusals_total Launches refused, by policy field.
# TYPE sandboxd_refusals_total counter
sandboxd_refusals_total{field="filesystem.write"} 2
sandboxd_refusals_total{field="network.allowlist"} 1
# HELP sandboxd_sessions Live sessions by state.
# TYPE sandboxd_sessions gauge
sandboxd_sessions{state="exited"} 1
sandboxd_sessions{state="running"} 2
# HELP sandboxd_launch_seconds Launch latency.
# TYPE sandboxd_launch_seconds histogram
sandboxd_launch_seconds_bucket{le="0.25"} 1
sandboxd_launch_seconds_bucket{le="1"} 2
sandboxd_launch_seconds_bucket{le="2"} 2
sandboxd_launch_seconds_bucket{le="+Inf"} 3
sandboxd_launch_seconds_sum 4.75
sandboxd_launch_seconds_count 3
# HELP sandboxd_denials_total Denials, by policy field.
# TYPE sandboxd_denials_total counter
`
	got := scrape(t, daemonLike())
	if got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}

func TestWriteToParses(t *testing.T) {
	fams := mustParse(t, scrape(t, daemonLike()))
	if len(fams) != 5 {
		t.Errorf("parsed %d families, want 5", len(fams))
	}
	for name, typ := range map[string]string{
		"sandboxd_launches_total": "counter",
		"sandboxd_refusals_total": "counter",
		"sandboxd_sessions":       "gauge",
		"sandboxd_launch_seconds": "histogram",
		"sandboxd_denials_total":  "counter",
	} {
		if f := fams[name]; f == nil || f.Type != typ {
			t.Errorf("family %s: got %+v, want type %s", name, f, typ)
		}
	}
	s := fams["sandboxd_refusals_total"].Samples[1]
	if s.Labels["field"] != "network.allowlist" || s.Value != 1 {
		t.Errorf("refusals sample: %+v", s)
	}
	if h := fams["sandboxd_launch_seconds"]; len(h.Samples) != 6 || h.Help != "Launch latency." {
		t.Errorf("histogram: %+v", h)
	}
}

func TestLabelsAndHistogramWithLabels(t *testing.T) {
	r := NewRegistry()
	g := r.Gauge("g", "", "a", "b")
	// Sorted value by value: "a" before "ab", though "a\xffz" > "ab\xffa".
	g.With("ab", "a").Set(1)
	g.With("ab", "a").Inc()
	g.With("ab", "a").Dec()
	g.With("a", "z").Set(2)
	g.With("a", "z").Add(0.5)
	h := r.Histogram("h", "", []float64{1, math.Inf(1)}, "op")
	h.With("x").Observe(1)
	h.With("x").Observe(math.NaN())
	want := `# TYPE g gauge
g{a="a",b="z"} 2.5
g{a="ab",b="a"} 1
# TYPE h histogram
h_bucket{op="x",le="1"} 1
h_bucket{op="x",le="+Inf"} 2
h_sum{op="x"} NaN
h_count{op="x"} 2
`
	got := scrape(t, r)
	if got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	mustParse(t, got)
}

func TestEscaping(t *testing.T) {
	r := NewRegistry()
	value := "back\\slash \"quoted\"\nnext line"
	help := "first\nsecond \\ \"quotes stay\""
	r.Counter("c_total", help, "v").With(value).Inc()
	r.Counter("bad_total", "", "v").With("ok\xffok").Inc()
	text := scrape(t, r)
	for _, want := range []string{
		`# HELP c_total first\nsecond \\ "quotes stay"` + "\n",
		`c_total{v="back\\slash \"quoted\"\nnext line"} 1` + "\n",
		`bad_total{v="ok` + "\uFFFD" + `ok"} 1` + "\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	fams := mustParse(t, text)
	if got := fams["c_total"].Help; got != help {
		t.Errorf("help round trip: %q, want %q", got, help)
	}
	if got := fams["c_total"].Samples[0].Labels["v"]; got != value {
		t.Errorf("label round trip: %q, want %q", got, value)
	}
}

func TestFormatFloat(t *testing.T) {
	for v, want := range map[float64]string{
		0:               "0",
		1:               "1",
		-3:              "-3",
		1e6:             "1000000",
		1 << 53:         "9007199254740992",
		1<<53 + 2:       "9.007199254740994e+15",
		0.5:             "0.5",
		1e-7:            "1e-07",
		1e300:           "1e+300",
		math.Inf(1):     "+Inf",
		math.Inf(-1):    "-Inf",
		math.MaxFloat64: "1.7976931348623157e+308",
	} {
		if got := formatFloat(v); got != want {
			t.Errorf("formatFloat(%v) = %q, want %q", v, got, want)
		}
	}
	if got := formatFloat(math.NaN()); got != "NaN" {
		t.Errorf("formatFloat(NaN) = %q", got)
	}
}

func TestRegistrationPanics(t *testing.T) {
	for name, register := range map[string]func(r *Registry){
		"empty name":          func(r *Registry) { r.Counter("", "") },
		"name with dash":      func(r *Registry) { r.Gauge("a-b", "") },
		"name with digit":     func(r *Registry) { r.Gauge("1a", "") },
		"label with colon":    func(r *Registry) { r.Counter("a", "", "b:c") },
		"reserved label":      func(r *Registry) { r.Counter("a", "", "__name") },
		"repeated label":      func(r *Registry) { r.Counter("a", "", "x", "x") },
		"le on histogram":     func(r *Registry) { r.Histogram("h", "", nil, "le") },
		"unsorted buckets":    func(r *Registry) { r.Histogram("h", "", []float64{1, 0.5}) },
		"repeated bucket":     func(r *Registry) { r.Histogram("h", "", []float64{1, 1}) },
		"NaN bucket":          func(r *Registry) { r.Histogram("h", "", []float64{math.NaN()}) },
		"duplicate name":      func(r *Registry) { r.Counter("a", ""); r.Gauge("a", "") },
		"histogram collision": func(r *Registry) { r.Counter("h_count", ""); r.Histogram("h", "", nil) },
		"gaugefunc collision": func(r *Registry) { r.Histogram("h", "", nil); r.GaugeFunc("h_sum", "", nil, nil) },
		"wrong label count":   func(r *Registry) { r.Counter("a", "", "x").With() },
		"negative counter":    func(r *Registry) { r.Counter("a", "").With().Add(-1) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("did not panic")
				}
			}()
			register(NewRegistry())
		})
	}
}

func TestGaugeFuncErrorsFailTheScrape(t *testing.T) {
	for name, values := range map[string][]GaugeValue{
		"wrong label count": {{[]string{"a", "b"}, 1}},
		"duplicate series":  {{[]string{"a"}, 1}, {[]string{"a"}, 2}},
	} {
		t.Run(name, func(t *testing.T) {
			r := NewRegistry()
			r.Counter("first_total", "")
			r.GaugeFunc("g", "", []string{"x"}, func() []GaugeValue { return values })
			var b bytes.Buffer
			if _, err := r.WriteTo(&b); err == nil {
				t.Error("WriteTo succeeded")
			}
			if b.Len() != 0 {
				t.Errorf("WriteTo wrote %q on error", b.String())
			}
		})
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWriteToReportsWriterError(t *testing.T) {
	if _, err := daemonLike().WriteTo(failWriter{}); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("WriteTo: %v, want the writer's error", err)
	}
}

// A scrape racing with updates must still be self-consistent: the parser
// checks every histogram's _count against its +Inf bucket.
func TestConcurrentUpdatesAndScrapes(t *testing.T) {
	r := NewRegistry()
	c := r.Counter("c_total", "", "worker")
	h := r.Histogram("h", "", []float64{1, 10, 100}, "worker")
	const workers, each = 8, 2000
	var wg sync.WaitGroup
	stop := make(chan struct{})
	scrapes := 0
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			var b strings.Builder
			if _, err := r.WriteTo(&b); err != nil {
				t.Error(err)
				return
			}
			if _, err := Parse(strings.NewReader(b.String())); err != nil {
				t.Error(err)
				return
			}
			scrapes++
		}
	})
	var workersDone sync.WaitGroup
	for w := range workers {
		workersDone.Go(func() {
			name := string(rune('a' + w))
			for i := range each {
				c.With(name).Inc()
				h.With(name).Observe(float64(i % 150))
			}
		})
	}
	workersDone.Wait()
	close(stop)
	wg.Wait()

	fams := mustParse(t, scrape(t, r))
	for _, s := range fams["c_total"].Samples {
		if s.Value != each {
			t.Errorf("%v: %v, want %d", s.Labels, s.Value, each)
		}
	}
	if got := len(fams["c_total"].Samples); got != workers {
		t.Errorf("%d counter series, want %d", got, workers)
	}
	t.Logf("%d scrapes during the updates", scrapes)
}

func TestHandler(t *testing.T) {
	srv := httptest.NewServer(daemonLike().Handler())
	defer srv.Close()

	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != ContentType {
		t.Errorf("GET: %s, Content-Type %q", resp.Status, resp.Header.Get("Content-Type"))
	}
	mustParse(t, string(body))

	resp, err = http.Head(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.ContentLength != int64(len(body)) {
		t.Errorf("HEAD: %s, Content-Length %d, want %d", resp.Status, resp.ContentLength, len(body))
	}

	resp, err = http.Post(srv.URL, "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST: %s, Allow %q", resp.Status, resp.Header.Get("Allow"))
	}
}

func TestHandlerFailedScrapeIs500(t *testing.T) {
	r := NewRegistry()
	r.GaugeFunc("g", "", nil, func() []GaugeValue { return []GaugeValue{{nil, 1}, {nil, 2}} })
	rec := httptest.NewRecorder()
	r.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusInternalServerError || strings.Contains(rec.Body.String(), "# TYPE") {
		t.Errorf("got %d %q, want a 500 without metrics", rec.Code, rec.Body.String())
	}
}

package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sandboxd/sandboxd/api/record"
	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
	"github.com/sandboxd/sandboxd/launcher"
	"github.com/sandboxd/sandboxd/policy"
)

// launchBuckets bound the launch latency histogram, in seconds: a launch
// takes milliseconds when the host is well, and seconds when it is not.
var launchBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}

// metrics are the daemon's Prometheus metrics. Counters are fed by the
// event bus, so they count exactly what the audit log records; sessions by
// state are counted from the registry when scraped. The Go runtime's and
// the process's own collectors come beside them.
type metrics struct {
	reg      *prometheus.Registry
	launches *prometheus.CounterVec
	latency  prometheus.Histogram
	refusals *prometheus.CounterVec
	denials  *prometheus.CounterVec
}

func newMetrics(s *Service) *metrics {
	reg := prometheus.NewRegistry()
	m := &metrics{
		reg: reg,
		launches: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sandboxd_launches_total",
			Help: "Sessions the daemon tried to launch, by result: started, failed_to_start (refused, or the command could not be executed), or killed (while starting)."}, []string{"result"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sandboxd_launch_duration_seconds",
			Help: "Time from a Start request to its command running in the sandbox.", Buckets: launchBuckets}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sandboxd_refusals_total",
			Help: "Sessions refused, by the policy field that could not be enforced on this host or that would widen a parent's policy."}, []string{"field"}),
		denials: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sandboxd_denials_total",
			Help: "Operations sandboxes tried and were refused, by the policy field that refused them."}, []string{"field"}),
	}
	reg.MustRegister(m.launches, m.latency, m.refusals, m.denials, sessionsCollector{s},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// sink counts one event; it runs under the event bus's lock.
func (m *metrics) sink(ev *sandboxdv1.Event, d *eventDetail) {
	if st := ev.GetState(); st != nil {
		switch {
		case st.GetFrom() == sandboxdv1.State_STARTING && st.GetTo() == sandboxdv1.State_RUNNING:
			m.launches.WithLabelValues("started").Inc()
			m.latency.Observe(d.launchLatency.Seconds())
		case st.GetFrom() == sandboxdv1.State_STARTING && st.GetTo() == sandboxdv1.State_KILLED:
			m.launches.WithLabelValues("killed").Inc()
		case st.GetTo() == sandboxdv1.State_FAILED_TO_START:
			m.launches.WithLabelValues("failed_to_start").Inc()
			if d.refusedField != "" {
				m.refusals.WithLabelValues(d.refusedField).Inc()
			}
		}
	}
	if dn := ev.GetDenial(); dn != nil {
		m.denials.WithLabelValues(dn.GetField()).Inc()
	}
}

// refused counts a Start refused before it became a session: a child
// asking for more than its parent has, or a policy the daemon cannot give
// what it needs.
func (m *metrics) refused(err error) {
	var we *policy.WidenError
	var ue *launcher.Unenforceable
	var qe *QuotaError
	switch {
	case errors.As(err, &we):
		m.refusals.WithLabelValues(we.Field).Inc()
	case errors.As(err, &ue):
		m.refusals.WithLabelValues(ue.Field).Inc()
	case errors.Is(err, ErrAuditLog):
		m.refusals.WithLabelValues("audit_log").Inc()
	case errors.As(err, &qe):
		m.refusals.WithLabelValues("quota." + qe.Flag).Inc()
	}
}

// sessionsCollector counts the daemon's sessions by state when scraped,
// every state included, so a series does not vanish at zero.
type sessionsCollector struct{ s *Service }

var sessionsDesc = prometheus.NewDesc("sandboxd_sessions",
	"Sessions the daemon holds, by state (ended ones until they are forgotten).", []string{"state"}, nil)

func (c sessionsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- sessionsDesc }

func (c sessionsCollector) Collect(ch chan<- prometheus.Metric) {
	for st, n := range c.s.sessionsByState() {
		ch <- prometheus.MustNewConstMetric(sessionsDesc, prometheus.GaugeValue, n, record.StateName(st))
	}
}

func (s *Service) sessionsByState() map[sandboxdv1.State]float64 {
	counts := map[sandboxdv1.State]float64{}
	for st := range sandboxdv1.State_name {
		if st != 0 {
			counts[sandboxdv1.State(st)] = 0
		}
	}
	s.mu.Lock()
	all := make([]*session, 0, len(s.sessions))
	for _, sess := range s.sessions {
		all = append(all, sess)
	}
	s.mu.Unlock()
	for _, sess := range all {
		sess.mu.Lock()
		counts[sess.state]++
		sess.mu.Unlock()
	}
	return counts
}

// MetricsHandler serves the metrics in the Prometheus text format.
func (s *Service) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{ErrorLog: metricsLog{s}})
}

// metricsLog hands promhttp's errors to the daemon's log.
type metricsLog struct{ s *Service }

func (l metricsLog) Println(v ...any) { l.s.logf("metrics: %s", fmt.Sprint(v...)) }

// serveMetrics serves /metrics on addr until ctx ends. It returns once
// listening, with the address actually bound (addr may ask for port 0).
func (s *Service) serveMetrics(ctx context.Context, addr string) (string, <-chan struct{}, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", s.MetricsHandler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.logf("metrics: %v", err)
		}
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), stopWait)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	return lis.Addr().String(), done, nil
}

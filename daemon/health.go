package daemon

import (
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/sandboxd/sandboxd/api/sandboxd/v1/sandboxdv1grpc"
)

// The grpc.health.v1 service answers for the daemon as a whole ("") and
// for the Sandboxd service by name: SERVING only once the self-test has
// passed, as a daemon whose sandboxes would not hold is not one to send
// work to; NOT_SERVING while it runs, after it failed, and from the
// moment the daemon stops.
func newHealth() *health.Server {
	h := health.NewServer()
	for _, name := range healthNames {
		h.SetServingStatus(name, healthpb.HealthCheckResponse_NOT_SERVING)
	}
	return h
}

var healthNames = []string{"", sandboxdv1grpc.Sandboxd_ServiceDesc.ServiceName}

// setHealth reports whether the daemon serves.
func (s *Service) setHealth(serving bool) {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if serving {
		st = healthpb.HealthCheckResponse_SERVING
	}
	for _, name := range healthNames {
		s.health.SetServingStatus(name, st)
	}
}

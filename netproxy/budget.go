package netproxy

import (
	"fmt"
	"sync"
)

// Budget bounds the connections to the outside that many Servers hold
// together: tunnels, forwarded HTTP requests and loopback forwards, each of
// which costs the daemon two sockets and, while spliced, two pipes. A
// Server's MaxConns bounds one session; a Budget bounds all of them, and
// those of one key (a caller), so that no caller's sessions together take
// the descriptors every other caller needs.
type Budget struct {
	total, perKey int
	// totalFlag and perKeyFlag name the setting of each limit, as a
	// refusal names it.
	totalFlag, perKeyFlag string

	mu   sync.Mutex
	n    int
	held map[string]int
}

// NewBudget returns a Budget of at most total connections in all and
// perKey for any one key; flags name the settings that set them, for the
// refusal's field ("quota." + flag). Limits of zero or less admit nothing.
func NewBudget(total int, totalFlag string, perKey int, perKeyFlag string) *Budget {
	return &Budget{total: total, totalFlag: totalFlag, perKey: perKey, perKeyFlag: perKeyFlag, held: make(map[string]int)}
}

// take counts one connection for key, or returns the refusal of target.
func (b *Budget) take(key, target string) *denied {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.held[key] >= b.perKey:
		return &denied{target: target, field: "quota." + b.perKeyFlag, detail: fmt.Sprintf("would exceed the %d connections to the outside %s's sessions may hold open together", b.perKey, key), busy: true}
	case b.n >= b.total:
		return &denied{target: target, field: "quota." + b.totalFlag, detail: fmt.Sprintf("would exceed the %d connections to the outside the daemon holds open for all sessions", b.total), busy: true}
	}
	b.n++
	b.held[key]++
	return nil
}

func (b *Budget) give(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.n--
	if b.held[key]--; b.held[key] <= 0 {
		delete(b.held, key)
	}
}

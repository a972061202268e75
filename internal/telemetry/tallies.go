package telemetry

import (
	"context"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// tallies are the counts of a counter that every call adds to (pml.calls,
// pml.pool.hits), by one attribute: an atomic add per call, read when the
// metrics are collected (an observable counter), where the SDK's
// synchronous counter would look its attribute set up in a map under a
// lock on every call. What is exported is the same cumulative sum.
type tallies struct {
	mu    sync.Mutex
	cells atomic.Pointer[map[attrKey]*tally]
}

// attrKey is one attribute, key=value.
type attrKey struct{ key, value string }

type tally struct {
	n   atomic.Int64
	opt metric.ObserveOption
}

// maxTallies bounds the kinds a counter keeps (the values are outcomes
// and server names, from the configuration); past it, counts go under
// the value _OTHER. A count is never dropped: the sum only grows.
const maxTallies = 4096

var callTallies, poolHitTallies, poolMissTallies tallies

func (t *tallies) add(key, value string) {
	k := attrKey{key, value}
	if m := t.cells.Load(); m != nil {
		if c, ok := (*m)[k]; ok {
			c.n.Add(1)
			return
		}
	}
	t.mu.Lock()
	c := t.cellLocked(k)
	t.mu.Unlock()
	c.n.Add(1)
}

func (t *tallies) cellLocked(k attrKey) *tally {
	old := t.cells.Load()
	if old != nil {
		if c, ok := (*old)[k]; ok {
			return c
		}
		if len(*old) >= maxTallies && k.value != "_OTHER" {
			return t.cellLocked(attrKey{k.key, "_OTHER"})
		}
	}
	next := make(map[attrKey]*tally, 1+lenOf(old))
	if old != nil {
		for ok, oc := range *old {
			next[ok] = oc
		}
	}
	c := &tally{opt: metric.WithAttributeSet(attribute.NewSet(attribute.String(k.key, k.value)))}
	next[k] = c
	t.cells.Store(&next)
	return c
}

func lenOf(m *map[attrKey]*tally) int {
	if m == nil {
		return 0
	}
	return len(*m)
}

// observe reports every count (metric.Int64Callback).
func (t *tallies) observe(_ context.Context, o metric.Int64Observer) error {
	if m := t.cells.Load(); m != nil {
		for _, c := range *m {
			o.Observe(c.n.Load(), c.opt)
		}
	}
	return nil
}

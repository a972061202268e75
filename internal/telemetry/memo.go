package telemetry

import (
	"sync"
	"sync/atomic"
)

// memo keeps what is built once per kind of request (a span's name and
// attributes, a metric's attribute set), for reading on every call
// without a lock or an allocation: reads see an immutable map, a new
// key copies it. (sync.Map would box each struct key it is asked for,
// an allocation per lookup.) It holds at most memoMax keys, as names
// come from clients and servers; when full it is emptied.
type memo[K comparable, V any] struct {
	mu sync.Mutex
	m  atomic.Pointer[map[K]V]
}

const memoMax = 4096

func (c *memo[K, V]) get(k K, build func(K) V) V {
	if m := c.m.Load(); m != nil {
		if v, ok := (*m)[k]; ok {
			return v
		}
	}
	v := build(k)
	c.mu.Lock()
	defer c.mu.Unlock()
	var next map[K]V
	if old := c.m.Load(); old != nil {
		if w, ok := (*old)[k]; ok {
			return w
		}
		if len(*old) < memoMax {
			next = make(map[K]V, len(*old)+1)
			for ok, ov := range *old {
				next[ok] = ov
			}
		}
	}
	if next == nil {
		// The first key, or the memo is full (a long pml serve sees
		// sessions come and go, each with its id): it starts again
		// with the kinds in use now.
		next = map[K]V{}
	}
	next[k] = v
	c.m.Store(&next)
	return v
}

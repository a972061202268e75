package container

import (
	"container/list"
	"sync"
)

// slotQueue hands out n slots first come, first served. A start that finds
// every slot taken joins the back of the line, and a slot given back goes
// straight to the head of the line, never back to a pool a newcomer could
// take it from first. A buffered channel (what Limited used before) makes
// no such promise: under 256 sessions its senders were woken in no
// particular order, some calls were passed over until their deadline while
// later ones ran, and a third of the calls failed.
type slotQueue struct {
	mu    sync.Mutex
	n     int
	taken int
	// line holds the *waiter of each start waiting for a slot, head first.
	line list.List
}

// waiter is one start in the line.
type waiter struct {
	// granted is closed when a slot has been handed to this waiter (it
	// has then left the line and holds the slot).
	granted chan struct{}
	elem    *list.Element
	// ahead is how many were in line before it when it joined.
	ahead int
}

func newSlotQueue(n int) *slotQueue { return &slotQueue{n: n} }

// take takes a slot if one is free and nobody waits for one.
func (q *slotQueue) take() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.taken < q.n && q.line.Len() == 0 {
		q.taken++
		return true
	}
	return false
}

// join takes a slot at once if one is free and nobody waits (nil), or
// puts the caller at the back of the line (its waiter; the caller waits
// for granted, or calls leave).
func (q *slotQueue) join() *waiter {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.taken < q.n && q.line.Len() == 0 {
		q.taken++
		return nil
	}
	w := &waiter{granted: make(chan struct{}), ahead: q.line.Len()}
	w.elem = q.line.PushBack(w)
	return w
}

// leave takes w out of the line (its caller gives up) and says how many
// starts were still ahead of it. A slot handed to w meanwhile is given on
// to the next in line: the caller no longer wants it.
func (q *slotQueue) leave(w *waiter) (ahead int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	select {
	case <-w.granted:
		q.releaseLocked()
		return 0
	default:
	}
	for e := q.line.Front(); e != nil && e != w.elem; e = e.Next() {
		ahead++
	}
	q.line.Remove(w.elem)
	return ahead
}

// release gives a slot back: to the head of the line if anyone waits.
func (q *slotQueue) release() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.releaseLocked()
}

func (q *slotQueue) releaseLocked() {
	if e := q.line.Front(); e != nil {
		w := q.line.Remove(e).(*waiter)
		close(w.granted) // the slot passes to w: taken stays as it is
		return
	}
	q.taken--
}

// counts says how many slots are taken and how many starts wait.
func (q *slotQueue) counts() (taken, waiting int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.taken, q.line.Len()
}

package container

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// QueueWait is what a call's container starts waited in the queue for a
// slot (Limited fills it in). A call that got its slot late and then ran
// out of time says so: its timeout is then the queue's as much as the
// work's, and the fix is the cap or fewer calls, not only a longer limit.
type QueueWait struct {
	mu     sync.Mutex
	waited time.Duration
	behind int
	cap    int
}

type queueWaitKey struct{}

// WithQueueWait returns ctx carrying a QueueWait for the starts made
// with it.
func WithQueueWait(ctx context.Context) (context.Context, *QueueWait) {
	q := &QueueWait{}
	return context.WithValue(ctx, queueWaitKey{}, q), q
}

func queueWaitOf(ctx context.Context) *QueueWait {
	q, _ := ctx.Value(queueWaitKey{}).(*QueueWait)
	return q
}

// add records one start's wait: behind it were the slots' holders and the
// starts queued before it when it joined.
func (q *QueueWait) add(waited time.Duration, behind, cap int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.waited += waited
	q.behind = max(q.behind, behind)
	q.cap = cap
}

// minQueueWaitNote is the wait below which a timeout is not put down to
// the queue.
const minQueueWaitNote = 100 * time.Millisecond

// Explain says how long the call waited in the queue before its slot and
// what to do, for the message of a call that then ran out of time; ""
// when it hardly waited.
func (q *QueueWait) Explain() string {
	if q == nil {
		return ""
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.waited < minQueueWaitNote {
		return ""
	}
	return fmt.Sprintf("it had waited %s of its time in the queue behind %s (sandbox.max_containers %d) before it got a container: "+
		"raise sandbox.max_containers in .pml.json, or make fewer calls in parallel", seconds(q.waited), plural(q.behind, "call"), q.cap)
}

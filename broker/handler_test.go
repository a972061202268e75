package broker

import (
	"context"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/internal/audit"
)

// fakeNext is the handler below a layer under test: it records that it
// was reached and with what, and returns res (noting note, if set).
type fakeNext struct {
	reached int
	got     call.Call
	note    *audit.Entry
	res     call.Result
}

func (f *fakeNext) Call(_ context.Context, c *call.Call) call.Result {
	f.reached++
	f.got = *c
	if f.note != nil {
		c.Note(*f.note)
	}
	return f.res
}

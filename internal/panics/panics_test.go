package panics

import (
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

func TestAPanicInAGoroutinePMLStartsIsLoggedAndPMLGoesOn(t *testing.T) {
	var logs strings.Builder
	done := make(chan struct{})
	go func() {
		defer close(done)
		Guarded(zerolog.New(&logs), "tools/list", "loading the server x", func() { panic("boom") })
	}()
	<-done
	if !strings.Contains(logs.String(), "pml panicked while loading the server x") || !strings.Contains(logs.String(), "goroutine ") {
		t.Errorf("log:\n%s", logs.String())
	}
}

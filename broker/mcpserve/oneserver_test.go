package mcpserve

import (
	"errors"
	"strings"
	"testing"

	"github.com/pml-dev/pml/broker/call"
	tl "github.com/pml-dev/pml/broker/tools"
	"github.com/pml-dev/pml/internal/wirename"
)

func TestServerViewShowsOneServerUnderItsOwnNames(t *testing.T) {
	v := serverView("everything")
	for name, want := range map[string]string{"everything:greet": "greet", "everything:greet (structured)": "greet (structured)", call.ContinueTool: call.ContinueTool} {
		if got, ok := v.show(name); !ok || got != want {
			t.Errorf("show(%q) = %q, %v; want %q", name, got, ok, want)
		}
		if back := v.internal(want); back != name {
			t.Errorf("internal(%q) = %q, want %q", want, back, name)
		}
	}
	for _, hidden := range []string{"filesystem:read_file", "everythingelse:greet", "pml:execute", "evil:everything:greet", "everything:pml__continue_workflow"} {
		if got, ok := v.show(hidden); ok {
			t.Errorf("%q is shown as %q", hidden, got)
		}
	}
	if got := v.internal("filesystem:read_file"); got != "everything:filesystem:read_file" {
		t.Errorf("a called name keeps the server's namespace: %q", got)
	}
}

// A call of a tool the server does not list is answered, under pml run,
// with the tool called and the server's tools as that view lists them.
func TestUnknownToolIsWordedForTheView(t *testing.T) {
	l := &listing{v: serverView("probe"), names: wirename.NewTable(true)}
	cause := &tl.UnknownToolError{Name: "probe:nosuch", Server: "probe", Tools: []string{"probe:echo", "probe:typed"}}
	res := inView(l, call.ResultFor(cause))
	if want := `no such tool "nosuch": the MCP server probe offers echo, typed`; res.Text != want || !res.IsError {
		t.Errorf("got %q, want %q", res.Text, want)
	}
	if !errors.Is(res.Cause, call.ErrNotFound) {
		t.Errorf("the cause is no longer not found: %v", res.Cause)
	}
	// The aggregate view names them as pml does.
	agg := &listing{v: view{}, names: wirename.NewTable(false)}
	if got := inView(agg, call.ResultFor(cause)).Text; got != cause.Error() || !strings.Contains(got, "probe:echo") {
		t.Errorf("aggregate: %q", got)
	}
}

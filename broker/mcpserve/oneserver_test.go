package mcpserve

import (
	"testing"

	"github.com/pml-dev/pml/broker/call"
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

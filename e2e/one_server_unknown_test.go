//go:build linux

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestOneServerUnknownToolNamesTheToolsAsListed (issue 53): under `pml
// run NAME` and `pml serve --server NAME` the server's tools are listed
// under their own names, so a call of a tool the server does not have is
// answered with the tool called and the server's tools named as this
// client lists them (`echo`, not `probe:echo`, which it cannot call);
// pml stdio still names them as pml does.
func TestOneServerUnknownToolNamesTheToolsAsListed(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t, probeConfig(t, ""))
	for via, s := range rawSessions(t, ws, "probe") {
		t.Run(strings.ReplaceAll(via, " ", "_"), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			// Listed first: the server is loaded, its tools known.
			s.raw.executions(t, s.cs)
			called := wireOf(via, "probe", "nosuch")
			res, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: called, Arguments: map[string]any{}})
			if err != nil {
				t.Fatalf("%s: %v", called, err)
			}
			out := text(res)
			if !res.IsError || !strings.Contains(out, "offers") {
				t.Fatalf("%s: isError=%v %q", called, res.IsError, out)
			}
			t.Logf("%s: %s", via, out)
			if via == "run" || via == "serve --server" {
				// The tools as listed; the how-to after them names the
				// entry to write in .pml.json, which is always SERVER:TOOL.
				listed, _, _ := strings.Cut(out, ". pml forwards")
				if strings.Contains(listed, "probe:") || !strings.Contains(out, `"nosuch"`) || !strings.Contains(out, "echo, ") {
					t.Errorf("the answer does not name the tools as this view lists them: %q", out)
				}
				return
			}
			if !strings.Contains(out, "probe:echo") {
				t.Errorf("the answer of the aggregate view: %q", out)
			}
		})
	}
}

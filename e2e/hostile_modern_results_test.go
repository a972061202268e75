//go:build linux

package e2e

import (
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestHostileServerCannotChooseAModernClientsResultType: on MCP
// 2026-07-28 a result's resultType tells the client whether the call is
// done or asks it something. A server behind pml writes its own
// ("input_required" on a finished call), or leaves out content, or sends
// it null; the client on 2026-07-28 gets, on the fast path, pml's
// resultType "complete" once and content as an array: a server's
// resultType makes its result one that is decoded and rebuilt
// (upstream.plainResult), so it never reaches the client.
func TestHostileServerCannotChooseAModernClientsResultType(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t, probeConfig(t, `, "workspace": "none", "env": {"PROBE_HOSTILE_RESULTS": "1"}`))
	client := mcp.NewClient(&mcp.Implementation{Name: "modern", Version: "1"}, nil)
	cs, log, _ := startRecorded(t, ws, client, "2026-07-28")
	if _, err := cs.ListTools(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"resulttype": "resulttype answered", "nocontent": "", "nullcontent": ""}
	for _, mode := range []string{"resulttype", "nocontent", "nullcontent"} {
		out, res := callC(t, cs, "probe:hostile", map[string]any{"mode": mode})
		if res.IsError || out != want[mode] {
			t.Errorf("%s: %q (isError %v)", mode, out, res.IsError)
		}
	}
	calls := checkModernResults(t, log)
	if len(calls) != 3 {
		t.Fatalf("%d tools/call results, want 3", len(calls))
	}
	for _, c := range calls {
		if n := strings.Count(c.frame, `"resultType"`); n != 1 || !strings.Contains(c.frame, `"resultType":"complete"`) {
			t.Errorf("the client did not get pml's one resultType \"complete\": %s", c.frame)
		}
	}
}

//go:build linux

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// upfrontCode writes w.txt, then makes a directory: half its work is
// done before it reaches the second tool.
const upfrontCode = `export async function main(args: Record<string, unknown>) {
  await mcp.filesystem.write_file({ path: "w.txt", content: "half" });
  await mcp.filesystem.create_directory({ path: "made" });
  return "both done";
}
`

// upfrontCapability publishes the capability acme.tools.upf.main in the
// seeds' two steps (metadata with tools_used, code at codeUrl) on a real
// `pml registry serve`, and adds it to a workspace with policy perms.
func upfrontCapability(t *testing.T, perms string) *workspace {
	t.Helper()
	needImage(t, "pml/deno:2.9.6")
	dir := t.TempDir()
	writeEntry(t, dir, "acme.tools.upf.main.json", fmt.Sprintf(`{"type": "deno", "routing": "client", "codeUrl": %q,
  "tools_used": ["filesystem:write_file", "filesystem:create_directory"], "client_tools": ["filesystem:write_file", "filesystem:create_directory"]}`, "/code/upf.ts"))
	reg := startRegistry(t, dir)
	codeSrv := codeOnRegistry(t, reg, codeFile(upfrontCode))
	ws := newWorkspace(t, fmt.Sprintf(`{"permissions": %s, "registries": [%q]}`, perms, codeSrv.URL))
	if code, _, stderr := runPML(t, ws, "add", "acme.tools.upf.main"); code != 0 {
		t.Fatalf("pml add: %d\n%s", code, stderr)
	}
	return ws
}

// runWithDialog starts `pml run` with a client whose dialog answers
// continue and counts the questions.
func runWithDialog(t *testing.T, ctx context.Context, ws *workspace, asked *atomic.Int32) (*mcp.ClientSession, *syncBuffer) {
	t.Helper()
	cmd := exec.Command(pmlBin, "run", "acme.tools.upf.main")
	cmd.Env = append(os.Environ(), "PML_WORKSPACE="+ws.Dir)
	cmd.Dir = ws.Dir
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "upfront-e2e", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked.Add(1)
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "continue"}}, nil
		},
	})
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("pml run: %v\n%s", err, stderr)
	}
	return cs, stderr
}

func auditCount(t *testing.T, ws *workspace) int {
	t.Helper()
	b, err := os.ReadFile(ws.path(".pml/audit.jsonl"))
	if os.IsNotExist(err) {
		return 0
	} else if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

// containerIDs are the ids of every container pml made for ws.
func containerIDs(t *testing.T, ws *workspace) map[string]bool {
	t.Helper()
	ids := map[string]bool{}
	for _, c := range containersOf(t, ws.Dir) {
		ids[c.ID] = true
	}
	return ids
}

// Issue 43, seeds 14.3 AC5-6: a capability whose tools_used names a
// denied tool is refused before its container starts: no container made,
// nothing written, one audit entry, a message naming the tool and rule.
func TestADeclaredDeniedToolRefusesTheCapabilityBeforeItsContainer(t *testing.T) {
	ws := upfrontCapability(t, `{"allow": ["upf:*", "filesystem:*"], "deny": ["filesystem:create_directory"]}`)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var asked atomic.Int32
	cs, stderr := runWithDialog(t, ctx, ws, &asked)
	defer cs.Close()
	// Whatever pml starts by itself (a pre-started container) is there
	// before the call.
	time.Sleep(3 * time.Second)
	before, entries := containerIDs(t, ws), auditCount(t, ws)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "main", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	out := text(res)
	if !res.IsError || !strings.Contains(out, "filesystem:create_directory") || !strings.Contains(out, `deny pattern "filesystem:create_directory"`) {
		t.Fatalf("refusal: %q\n%s", out, stderr)
	}
	time.Sleep(2 * time.Second)
	for id := range containerIDs(t, ws) {
		if !before[id] {
			t.Errorf("a container was made for the refused run: %s", id)
		}
	}
	if _, err := os.Stat(ws.path("w.txt")); err == nil {
		t.Error("the run started: it wrote w.txt before reaching the denied tool")
	}
	if n := auditCount(t, ws) - entries; n != 1 {
		b, _ := os.ReadFile(ws.path(".pml/audit.jsonl"))
		t.Errorf("%d audit entries for the refused call, want 1:\n%s", n, b)
	}
	if asked.Load() != 0 {
		t.Errorf("asked %d times about a run that is refused", asked.Load())
	}
}

// One with two asked tools asks once: one question in the client's
// dialog names both, and the run's two calls ask nothing more.
func TestTwoDeclaredAskedToolsAskOnce(t *testing.T) {
	ws := upfrontCapability(t, `{"allow": ["upf:*", "filesystem:read_file"], "ask": ["filesystem:write_file", "filesystem:create_directory"]}`)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var asked atomic.Int32
	cs, stderr := runWithDialog(t, ctx, ws, &asked)
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "main", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || !strings.Contains(text(res), "both done") {
		t.Fatalf("run: %q\n%s", text(res), stderr)
	}
	if asked.Load() != 1 {
		t.Errorf("asked %d times, want once for both declared tools", asked.Load())
	}
	if b, _ := os.ReadFile(ws.path("w.txt")); string(b) != "half" {
		t.Errorf("w.txt: %q", b)
	}
	if st, err := os.Stat(ws.path("made")); err != nil || !st.IsDir() {
		t.Errorf("made: %v", err)
	}
}

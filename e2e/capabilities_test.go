//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// runPML runs a pml command in ws without a terminal and returns its
// exit code, stdout and stderr.
func runPML(t *testing.T, ws *workspace, args ...string) (int, string, string) {
	t.Helper()
	cmd := execPML(ws, args...)
	cmd.Dir = ws.Dir
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Stdin = nil
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("pml %v: %v", args, err)
	}
	return code, stdout.String(), stderr.String()
}

// pmlRun starts `pml run name` in ws with the go-sdk client.
func pmlRun(t *testing.T, ctx context.Context, ws *workspace, name string) (*mcp.ClientSession, *syncBuffer) {
	t.Helper()
	return pmlRunVersion(t, ctx, ws, name, "")
}

// pmlRunVersion is pmlRun with the protocol version the client offers
// ("" for the go-sdk's default).
func pmlRunVersion(t *testing.T, ctx context.Context, ws *workspace, name, version string) (*mcp.ClientSession, *syncBuffer) {
	t.Helper()
	cmd := execPML(ws, "run", name)
	cmd.Dir = ws.Dir
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	var opts *mcp.ClientSessionOptions
	if version != "" {
		opts = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "pml-run-e2e", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, opts)
	if err != nil {
		t.Fatalf("pml run %s: %v\n%s", name, err, stderr)
	}
	return cs, stderr
}

// listedURIs lists a session's resources and returns their URIs.
func listedURIs(t *testing.T, ctx context.Context, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListResources(ctx, nil)
	if err != nil {
		t.Fatalf("resources/list: %v", err)
	}
	var uris []string
	for _, r := range res.Resources {
		uris = append(uris, r.URI)
	}
	return uris
}

// checkEverythingInfo reads embedded:info, the go-sdk everything
// example's resource, and checks it is that server's text.
func checkEverythingInfo(t *testing.T, ctx context.Context, cs *mcp.ClientSession, what string) {
	t.Helper()
	read, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "embedded:info"})
	if err != nil {
		t.Fatalf("resources/read embedded:info (%s): %v", what, err)
	}
	if len(read.Contents) != 1 || !strings.Contains(read.Contents[0].Text, "hello example server") {
		t.Errorf("embedded:info (%s) is not the everything server's: %+v", what, read.Contents)
	}
}

// checkEverythingTemplate checks the everything example's one resource
// template is listed as it declares it.
func checkEverythingTemplate(t *testing.T, ctx context.Context, cs *mcp.ClientSession) {
	t.Helper()
	tpl, err := cs.ListResourceTemplates(ctx, nil)
	if err != nil {
		t.Fatalf("resources/templates/list: %v", err)
	}
	if len(tpl.ResourceTemplates) != 1 || tpl.ResourceTemplates[0].URITemplate != "http://example.com/~{resource_name}/" {
		t.Fatalf("resources/templates/list: %+v", tpl.ResourceTemplates)
	}
}

func TestAddRunListRemoveACapability(t *testing.T) {
	dir := t.TempDir()
	writeEntry(t, dir, "pml.mcp.regprobe.server.json", probeEntry(t, "regprobe", "standalone"))
	reg := startRegistry(t, dir)
	ws := newWorkspace(t, registryConfig("", reg.URL))
	ws.write(".mcp.json", `{"mcpServers": {"other": {"command": "other-server"}}, "x-custom": 1}`)

	// --yes grants what the entry asks of this machine (its image).
	if code, _, stderr := runPML(t, ws, "add", "regprobe", "--yes"); code != 0 || !strings.Contains(stderr, "regprobe added") {
		t.Fatalf("pml add: exit %d\n%s", code, stderr)
	}
	var mcpFile struct {
		MCPServers map[string]struct {
			Command string   `json:"command"`
			Args    []string `json:"args"`
		} `json:"mcpServers"`
		Custom int `json:"x-custom"`
	}
	b, _ := os.ReadFile(ws.path(".mcp.json"))
	if err := json.Unmarshal(b, &mcpFile); err != nil {
		t.Fatal(err)
	}
	entry := mcpFile.MCPServers["regprobe"]
	if entry.Command != pmlBin || strings.Join(entry.Args, " ") != "run regprobe" || mcpFile.MCPServers["other"].Command != "other-server" || mcpFile.Custom != 1 {
		t.Errorf(".mcp.json after add: %s", b)
	}
	if lock, _ := readLock(t, ws); lock.Entries["pml.mcp.regprobe.server"].Type != "stdio" {
		t.Errorf("not locked: %+v", lock.Entries)
	}
	code, stdout, _ := runPML(t, ws, "list")
	if code != 0 || !strings.Contains(stdout, "regprobe") || !strings.Contains(stdout, "mcp.regprobe.*") {
		t.Errorf("pml list: %d %q", code, stdout)
	}
	code, stdout, _ = runPML(t, ws, "list", "--json")
	var listed struct{ Capabilities []struct{ Name, FQDN string } }
	if code != 0 || json.Unmarshal([]byte(stdout), &listed) != nil || len(listed.Capabilities) != 1 || listed.Capabilities[0].Name != "regprobe" {
		t.Errorf("pml list --json: %d %q", code, stdout)
	}

	// run works with the registry gone.
	reg.stop(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, stderr := pmlRun(t, ctx, ws, "regprobe")
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	if got := strings.Join(names, ","); !strings.Contains(got, "echo") || strings.Contains(got, "regprobe:") || strings.Contains(got, "filesystem:") {
		t.Errorf("pml run lists %s: want the capability's own tools, unprefixed, and nothing else", got)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "env"})
	if err != nil || res.IsError || !strings.Contains(text(res), "GREETING=standalone") {
		t.Errorf("env through pml run: %v %q\n%s", err, text(res), stderr)
	}
	_ = cs.Close()

	if code, _, stderr := runPML(t, ws, "remove", "regprobe", "--clean"); code != 0 {
		t.Fatalf("pml remove: %d %s", code, stderr)
	}
	b, _ = os.ReadFile(ws.path(".mcp.json"))
	if strings.Contains(string(b), "regprobe") || !strings.Contains(string(b), "other-server") {
		t.Errorf(".mcp.json after remove: %s", b)
	}
	if _, err := os.Stat(ws.path(".mcp.json.backup")); err != nil {
		t.Error("no backup of .mcp.json")
	}
	var after struct{ Capabilities []any }
	if code, stdout, _ := runPML(t, ws, "list", "--json"); code != 0 || json.Unmarshal([]byte(stdout), &after) != nil || after.Capabilities == nil || len(after.Capabilities) != 0 {
		t.Errorf("list after remove: %q", stdout)
	}
	if code, _, _ := runPML(t, ws, "remove", "regprobe"); code != 2 {
		t.Errorf("removing what is not there: exit %d, want 2", code)
	}
}

func TestAddRefusesUnknownAndAsksForAChangedEntry(t *testing.T) {
	dir := t.TempDir()
	writeEntry(t, dir, "pml.mcp.chg.server.json", probeEntry(t, "chg", "one"))
	reg := startRegistry(t, dir)
	ws := newWorkspace(t, registryConfig("", reg.URL))
	if code, _, stderr := runPML(t, ws, "add", "nosuch"); code != 2 || !strings.Contains(stderr, "pml.mcp.nosuch.server") {
		t.Errorf("unknown: exit %d %s", code, stderr)
	}
	if code, _, stderr := runPML(t, ws, "add", "Bad Name"); code != 2 {
		t.Errorf("bad name: exit %d %s", code, stderr)
	}
	if code, _, stderr := runPML(t, ws, "add", "chg", "--yes"); code != 0 {
		t.Fatalf("add: %d %s", code, stderr)
	}
	_, before := readLock(t, ws)
	writeEntry(t, dir, "pml.mcp.chg.server.json", probeEntry(t, "chg", "two"))
	code, _, stderr := runPML(t, ws, "add", "chg")
	if code != 3 || !strings.Contains(stderr, "Hash changed") || !strings.Contains(stderr, "--yes") {
		t.Errorf("a changed entry without --yes: exit %d\n%s", code, stderr)
	}
	if _, after := readLock(t, ws); string(after) != string(before) {
		t.Error("the lockfile changed without approval")
	}
	if code, _, stderr := runPML(t, ws, "add", "chg", "--yes"); code != 0 {
		t.Errorf("with --yes: %d %s", code, stderr)
	}
	if _, after := readLock(t, ws); string(after) == string(before) {
		t.Error("the approved version was not locked")
	}
}

func TestADenoCapabilityRunsOfflineWithPmlRun(t *testing.T) {
	needImage(t, "pml/deno:2.9.6")
	dir := t.TempDir()
	writeEntry(t, dir, "acme.tools.mathx.double.ts", `export function double(args: { n: number }) { return args.n * 2; }
export async function noteLength(args: { path: string }) {
  const text = await mcp.filesystem.read_file({ path: args.path });
  return text.length;
}
`)
	reg := startRegistry(t, dir)
	ws := newWorkspace(t, registryConfig("", reg.URL))
	ws.write("note.txt", "twelve chars")
	if code, _, stderr := runPML(t, ws, "add", "acme.tools.mathx.double"); code != 0 || !strings.Contains(stderr, "double, noteLength") {
		t.Fatalf("pml add: %d\n%s", code, stderr)
	}
	reg.stop(t)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, stderr := pmlRun(t, ctx, ws, "acme.tools.mathx.double")
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	if got := strings.Join(names, ","); !strings.Contains(got, "double") || !strings.Contains(got, "noteLength") {
		t.Fatalf("tools of the deno capability: %s\n%s", got, stderr)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "double", Arguments: map[string]any{"n": 21}})
	if err != nil || res.IsError || text(res) != "42" {
		t.Errorf("double: %v %q\n%s", err, text(res), stderr)
	}
	// Its mcp.* calls go through the broker (read tools are allowed here).
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "noteLength", Arguments: map[string]any{"path": "note.txt"}})
	if err != nil || res.IsError || text(res) != "12" {
		t.Errorf("noteLength: %v %q\n%s", err, text(res), stderr)
	}
}

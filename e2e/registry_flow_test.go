//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// probeEntry is registry metadata for the probe server under namespace
// ns, with GREETING set to greeting (changing it publishes a new version).
func probeEntry(t *testing.T, ns, greeting string) string {
	return fmt.Sprintf(`{"type": "stdio", "description": "probe from a registry", "tools": ["%s:echo", "%s:env"],
 "image": %q, "env": {"GREETING": %q}, "workspace": "none"}`, ns, ns, probeImage(t), greeting)
}

func writeEntry(t *testing.T, dir, name, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// callGranted calls a registry entry's tool, granting (continue) what
// its entry asks of this machine when that is asked first (an approval of
// type registry_grant: its image, variables, network), as a person would.
func callGranted(t *testing.T, s *session, tool string, args map[string]any) (string, *mcp.CallToolResult) {
	t.Helper()
	out, res := s.call(t, tool, args)
	var a approval
	if res.IsError || res.StructuredContent == nil {
		return out, res
	}
	structured(t, res, &a)
	if a.ApprovalType != "registry_grant" {
		return out, res
	}
	with := map[string]any{"continue_workflow": cont(a.WorkflowID, true, false)}
	for k, v := range args {
		with[k] = v
	}
	return s.call(t, tool, with)
}

func registryConfig(extra string, urls ...string) string {
	js, _ := json.Marshal(urls)
	return fmt.Sprintf(`{"permissions": {"allow": ["*"]}, "registries": %s%s}`, js, extra)
}

// requestsFor counts the registry's logged requests whose path names ns.
func requestsFor(reg *registryServer, ns string) int {
	return strings.Count(reg.stderr.String(), "pml.mcp."+ns+".server")
}

type lockDoc struct {
	Entries map[string]struct {
		FQDN      string `json:"fqdn"`
		Integrity string `json:"integrity"`
		Type      string `json:"type"`
	} `json:"entries"`
}

func readLock(t *testing.T, ws *workspace) (lockDoc, []byte) {
	t.Helper()
	b, err := os.ReadFile(ws.path(".pml/mcp.lock"))
	if err != nil {
		t.Fatalf("reading the lockfile: %v", err)
	}
	var d lockDoc
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("lockfile %s: %v", b, err)
	}
	return d, b
}

func TestARegistryServerIsFetchedLockedApprovedAndWorksOffline(t *testing.T) {
	dir := t.TempDir()
	writeEntry(t, dir, "pml.mcp.regprobe.server.json", probeEntry(t, "regprobe", "v1"))
	reg := startRegistry(t, dir)
	ws := newWorkspace(t, registryConfig("", reg.URL))

	// First use: fetched (4-part name → redirect → hashed version), locked, run.
	s := startSession(t, ws)
	out, res := callGranted(t, s, "regprobe:env", nil)
	if res.IsError || !strings.Contains(out, "GREETING=v1") {
		t.Fatalf("regprobe:env: %q\n%s", out, s.stderr.String())
	}
	lock, _ := readLock(t, ws)
	first, ok := lock.Entries["pml.mcp.regprobe.server"]
	if !ok || first.Type != "stdio" || !strings.HasPrefix(first.FQDN, "pml.mcp.regprobe.server.") {
		t.Fatalf("lockfile entries: %+v", lock.Entries)
	}
	// A later session lists the server's tools from the lockfile.
	_ = s.Close()
	s = startSession(t, ws)
	if !listsTool(t, s.ClientSession, "regprobe:echo") {
		t.Error("a locked registry server's tools are not in tools/list")
	}
	_ = s.Close()

	// The registry publishes a changed entry: an integrity approval.
	writeEntry(t, dir, "pml.mcp.regprobe.server.json", probeEntry(t, "regprobe", "v2-changed"))
	s = startSession(t, ws)
	_, res = s.call(t, "regprobe:env", nil)
	var a struct {
		approval
		Context map[string]any `json:"context"`
	}
	structured(t, res, &a)
	if res.IsError || a.ApprovalType != "integrity" || !strings.Contains(a.Description, "Hash changed for pml.mcp.regprobe.server") ||
		a.Context["old_hash"] == a.Context["new_hash"] || a.Context["old_hash"] == nil {
		t.Fatalf("expected an integrity approval, got isError=%v %+v", res.IsError, a)
	}
	_, before := readLock(t, ws)
	out, res = s.call(t, "regprobe:env", map[string]any{"continue_workflow": cont(a.WorkflowID, false, false)})
	if !res.IsError || !strings.Contains(out, "Rejected") {
		t.Errorf("reject: %q", out)
	}
	if _, after := readLock(t, ws); string(after) != string(before) {
		t.Errorf("a rejected integrity change altered the lockfile:\n%s\n%s", before, after)
	}
	// Asked again; this time approved: the new version runs and is locked.
	_, res = s.call(t, "regprobe:env", nil)
	structured(t, res, &a)
	if a.ApprovalType != "integrity" {
		t.Fatalf("second ask: %+v", a)
	}
	out, res = s.call(t, "regprobe:env", map[string]any{"continue_workflow": cont(a.WorkflowID, true, false)})
	if res.IsError || !strings.Contains(out, "GREETING=v2-changed") {
		t.Fatalf("approved: %q", out)
	}
	lock, _ = readLock(t, ws)
	if second := lock.Entries["pml.mcp.regprobe.server"]; second.Integrity == first.Integrity || second.FQDN == first.FQDN {
		t.Errorf("the approved version was not locked: %+v", second)
	}
	_ = s.Close()

	// Registry down: the cached entry still runs, with a warning.
	reg.stop(t)
	s = startSession(t, ws)
	out, res = s.call(t, "regprobe:echo", map[string]any{"text": "offline"})
	if res.IsError || !strings.Contains(out, "offline") {
		t.Fatalf("offline call: %q\n%s", out, s.stderr.String())
	}
	if !s.logs("unreachable") {
		t.Errorf("no warning that the registry was unreachable:\n%s", s.stderr.String())
	}
}

func TestUnknownRegistryToolsAndFirstMatchAndPrivateOverride(t *testing.T) {
	dirA, dirB := t.TempDir(), t.TempDir()
	writeEntry(t, dirA, "pml.mcp.both.server.json", probeEntry(t, "both", "from-A"))
	writeEntry(t, dirB, "pml.mcp.both.server.json", probeEntry(t, "both", "from-B"))
	writeEntry(t, dirB, "pml.mcp.onlyb.server.json", probeEntry(t, "onlyb", "from-B"))
	writeEntry(t, dirB, "pml.mcp.mine.server.json", probeEntry(t, "mine", "from-registry"))
	regA, regB := startRegistry(t, dirA), startRegistry(t, dirB)
	private := fmt.Sprintf(`, "private_mcps": {"mine": {"image": %q, "env": {"GREETING": "private"}, "workspace": "none"}}`, probeImage(t))
	ws := newWorkspace(t, registryConfig(private, regA.URL, regB.URL))
	s := startSession(t, ws)

	if out, res := callGranted(t, s, "both:env", nil); res.IsError || !strings.Contains(out, "GREETING=from-A") {
		t.Errorf("first match should win: %q", out)
	}
	if out, res := callGranted(t, s, "onlyb:env", nil); res.IsError || !strings.Contains(out, "GREETING=from-B") {
		t.Errorf("an entry only the second registry has: %q", out)
	}
	if n := requestsFor(regB, "both"); n != 0 {
		t.Errorf("the second registry was asked for an entry the first one has (%d requests)", n)
	}
	if out, res := s.call(t, "mine:env", nil); res.IsError || !strings.Contains(out, "GREETING=private") {
		t.Errorf("private_mcps should override the registry: %q", out)
	}
	if n := requestsFor(regA, "mine") + requestsFor(regB, "mine"); n != 0 {
		t.Errorf("a private server was looked up in a registry (%d requests)", n)
	}
	out, res := s.call(t, "nosuch:thing", nil)
	if !res.IsError || !strings.Contains(out, "no registry has pml.mcp.nosuch.server") || !strings.Contains(out, "not_found") && !strings.Contains(out, "not in registry") {
		t.Errorf("unknown tool: %q", out)
	}
	// Denied tools are refused before any fetch.
	ws2 := newWorkspace(t, `{"permissions": {"allow": ["*"], "deny": ["onlyb:*"]}, "registries": ["`+regB.URL+`"]}`)
	before := requestsFor(regB, "onlyb")
	s2 := startSession(t, ws2)
	if out, res := s2.call(t, "onlyb:env", nil); !res.IsError || !strings.Contains(out, "deny pattern") {
		t.Errorf("denied registry tool: %q", out)
	}
	if requestsFor(regB, "onlyb") != before {
		t.Error("a denied tool was fetched from the registry")
	}
}

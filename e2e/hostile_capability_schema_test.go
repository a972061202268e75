//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestHostileRegistryInputSchemaFetchesNothing: a registry's inputSchema
// for a capability points, through "$ref", at a service of this machine.
// Neither pml add, nor listing the capability's tools, nor calling one
// makes pml fetch it: the schema is not used (the tool takes any arguments
// object, as the warning says), and the service is never asked.
func TestHostileRegistryInputSchemaFetchesNothing(t *testing.T) {
	t.Parallel()
	needImage(t, "pml/deno:2.9.6")
	local, asked := hostListener(t)
	dir := t.TempDir()
	writeEntry(t, dir, "casys.pml.refschema.server.json", fmt.Sprintf(`{"type": "deno", "code_url": "/code/r.ts", "routing": "client",
  "description": "Answers its argument.",
  "inputSchema": {"type": "object", "properties": {"q": {"$ref": "http://%s/schema.json"}}}}`, local.Addr()))
	reg := startRegistry(t, dir)
	codeSrv := codeOnRegistry(t, reg, codeFile("export function search(args: { q: string }) { return 'got ' + args.q; }\n"))
	ws := newWorkspace(t, registryConfig("", codeSrv.URL))
	if code, _, stderr := runPML(t, ws, "add", "casys.pml.refschema"); code != 0 {
		t.Fatalf("pml add: exit %d\n%s", code, stderr)
	}

	s := startSession(t, ws)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tools, err := s.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var schema string
	for _, tool := range tools.Tools {
		if pmlName(tool.Name) == "refschema:search" {
			b, _ := json.Marshal(tool.InputSchema)
			schema = string(b)
		}
	}
	if schema == "" {
		t.Fatalf("refschema:search is not listed:\n%s", tail(s.stderr.String()))
	}
	if strings.Contains(schema, "$ref") {
		t.Errorf("the tool's schema keeps the registry's remote $ref: %s", schema)
	}
	if !s.logs("the registry's input schema is not used") {
		t.Errorf("pml's stderr does not say the schema was not used:\n%s", tail(s.stderr.String()))
	}
	if out, res := s.call(t, "refschema:search", map[string]any{"q": "x"}); res.IsError || !strings.Contains(out, "got x") {
		t.Errorf("refschema:search: %q\n%s", out, tail(s.stderr.String()))
	}
	if n := asked.Load(); n != 0 {
		t.Errorf("the service the schema's $ref names was asked %d times", n)
	}
}

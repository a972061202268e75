//go:build linux

package e2e

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pml-dev/pml/internal/wirename"
)

// inspectorCLI installs (once, into the cache make test-conformance uses:
// e2e/conformance/install.sh) the MCP Inspector and the Node.js it runs
// on, and returns both. It skips only when the npm registry cannot be
// reached, saying so.
func inspectorCLI(t *testing.T) (node, cli string) {
	t.Helper()
	cache, versions := installConformance(t, true)
	node = filepath.Join(cache, "node-"+versions["node"], "node_modules", "node", "bin", "node")
	cli = filepath.Join(cache, "inspector-"+versions["inspector"], "node_modules", "@modelcontextprotocol", "inspector", "clients", "launcher", "build", "index.js")
	for _, f := range []string{node, cli} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("install.sh ran but %s is missing: %v", f, err)
		}
	}
	return node, cli
}

// installConformance runs e2e/conformance/install.sh (a no-op once all of
// its LIST is in the cache: make test runs it from its start, beside the
// builds, so that no test waits on npm's registry) and returns the cache
// and the versions it installs. With skipOffline, an unreachable npm
// registry skips the test, saying so; without, it fails it.
func installConformance(t *testing.T, skipOffline bool) (cache string, versions map[string]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	install := exec.CommandContext(ctx, "bash", "conformance/install.sh")
	if out, err := install.CombinedOutput(); err != nil {
		if skipOffline {
			ping, perr := exec.CommandContext(ctx, "npm", "ping").CombinedOutput()
			if perr != nil {
				t.Skipf("the npm registry is unreachable (npm ping: %v: %s), so the MCP Inspector cannot be installed; install.sh said: %s", perr, strings.TrimSpace(string(ping)), out)
			}
		}
		t.Fatalf("e2e/conformance/install.sh failed (npm must reach its registry): %v\n%s", err, out)
	}
	cache = os.Getenv("PML_CONFORMANCE_CACHE")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache", "pml", "conformance")
	}
	return cache, installedVersions(t)
}

// installedVersions reads the versions install.sh installs (its LIST:
// name, package, version), so the test follows a bump there.
func installedVersions(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open("conformance/install.sh")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	in := false
	for sc := bufio.NewScanner(f); sc.Scan(); {
		line := sc.Text()
		switch {
		case strings.HasSuffix(line, "<<'LIST'"):
			in = true
		case line == "LIST":
			in = false
		case in:
			if f := strings.Fields(line); len(f) == 3 {
				out[f[0]] = f[2]
			}
		}
	}
	if out["node"] == "" || out["inspector"] == "" || out["inspector-cli"] == "" {
		t.Fatalf("conformance/install.sh names no node, inspector or inspector-cli version: %v", out)
	}
	return out
}

// TestTheInspectorInTheModernEraCallsAServersToolOverStdio: the MCP
// Inspector's CLI, a strict client, in its modern protocol era (MCP
// 2026-07-28: server/discover, no initialize; and in auto, where it
// probes for it), lists pml's tools and calls
// a third-party server's tool (the go-sdk's everything example) over `pml
// stdio`. It refuses a result without resultType ("missing required
// resultType"), as it did every server tool's result pml forwarded as
// bytes.
func TestTheInspectorInTheModernEraCallsAServersToolOverStdio(t *testing.T) {
	needImage(t, everythingImage)
	node, cli := inspectorCLI(t)
	ws := newWorkspace(t, everythingConfig(`"*"`))
	scratch := t.TempDir()
	inspect := func(era string, args ...string) (string, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		all := []string{cli, "--cli", "--protocol-era", era}
		// The Inspector starts pml with a few variables of its own
		// environment only (PATH, HOME…): what pml reads is passed.
		for _, kv := range append(os.Environ(), "PML_WORKSPACE="+ws.Dir) {
			if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "PML_") || strings.HasPrefix(k, "XDG_") || strings.HasPrefix(k, "DOCKER_") {
				all = append(all, "-e", kv)
			}
		}
		all = append(append(all, "--transport", "stdio", "--cwd", ws.Dir, pmlBin, "stdio"), args...)
		cmd := exec.CommandContext(ctx, node, all...)
		// The Inspector's own files stay out of the person's home.
		cmd.Env = append(os.Environ(), "PML_WORKSPACE="+ws.Dir,
			"MCP_CATALOG_PATH="+filepath.Join(scratch, "mcp.json"), "MCP_CLIENT_CONFIG_PATH="+filepath.Join(scratch, "client.json"))
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("inspector %v: %v\nstdout:\n%s\nstderr:\n%s", args, err, stdout.String(), stderr.String())
		}
		return stdout.String(), stderr.String()
	}
	if out, errs := inspect("modern", "--method", "tools/list"); !strings.Contains(out, `"everything__greet"`) {
		t.Fatalf("tools/list in the modern era does not list everything__greet:\n%s\nstderr:\n%s", out, errs)
	}
	// auto: the Inspector probes server/discover first and takes
	// 2026-07-28, as the dual-era clients (Claude Code, codex) do.
	for _, era := range []string{"modern", "auto"} {
		out, errs := inspect(era, "--method", "tools/call", "--tool-name", "everything__greet", "--tool-arg", "name=inspector")
		if !strings.Contains(out, "Hi inspector") || strings.Contains(out, `"isError": true`) {
			t.Fatalf("tools/call everything__greet (--protocol-era %s):\n%s\nstderr:\n%s", era, out, errs)
		}
		// The Inspector's subscriptions/listen, a stream it ends by
		// going, is not a request pml waits to answer when the
		// Inspector closes its input (pml's log, which the Inspector
		// passes on).
		if strings.Contains(errs, "not answered before pml exits") {
			t.Errorf("pml waited for the Inspector's subscriptions/listen at exit (--protocol-era %s):\n%s", era, errs)
		}
	}
}

// TestTheInspectorInTheModernEraGetsTheLegacyAnswerWithoutElicitation:
// the MCP Inspector CLI (a strict 2026-07-28 client, which declares no
// elicitation and answers no dialog) calls the everything server's elicit
// (form) tool over `pml stdio` under its shortened wire name: it gets
// what a legacy client without elicitation gets (the server's question
// refused, said in the result), as a result it accepts.
func TestTheInspectorInTheModernEraGetsTheLegacyAnswerWithoutElicitation(t *testing.T) {
	needImage(t, everythingImage)
	node, cli := inspectorCLI(t)
	ws := newWorkspace(t, everythingConfig(`"*"`))
	scratch := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	all := []string{cli, "--cli", "--protocol-era", "modern"}
	for _, kv := range append(os.Environ(), "PML_WORKSPACE="+ws.Dir) {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "PML_") || strings.HasPrefix(k, "XDG_") || strings.HasPrefix(k, "DOCKER_") {
			all = append(all, "-e", kv)
		}
	}
	all = append(all, "--transport", "stdio", "--cwd", ws.Dir, pmlBin, "stdio",
		"--method", "tools/call", "--tool-name", wirename.Encode("everything:elicit (form)"))
	cmd := exec.CommandContext(ctx, node, all...)
	cmd.Env = append(os.Environ(), "PML_WORKSPACE="+ws.Dir,
		"MCP_CATALOG_PATH="+filepath.Join(scratch, "mcp.json"), "MCP_CLIENT_CONFIG_PATH="+filepath.Join(scratch, "client.json"))
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// The CLI exits non-zero for a result with isError, which this is.
	_ = cmd.Run()
	if out := stdout.String(); !strings.Contains(out, "does not support elicitation") {
		t.Fatalf("the Inspector should get the server's refused question as a result it accepts:\nstdout:\n%s\nstderr:\n%s", out, stderr.String())
	}
}

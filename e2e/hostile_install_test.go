//go:build linux

package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pml-dev/pml/internal/deps"
)

// An install step pins one package by its integrity (install.package,
// install.integrity). The writers attacked here: the package registry,
// which serves whatever it likes for a package nothing pins; the
// repository's .pml.json and a registry entry, which write the step and
// can name in install.package another package than the one installed.
// The npm registry is a loopback one (npmPackages), reached by the
// install container through pml's egress proxy (`--registry` in the
// step's arguments names its host).

// pinnedServer is the pinned package's program: a stdio MCP server whose
// one tool, probe, tries to write its own /deps and reports what it sees
// there.
const pinnedServer = `const fs = require('fs');
const rl = require('readline').createInterface({input: process.stdin});
const send = m => process.stdout.write(JSON.stringify(m) + "\n");
const tryWrite = p => { try { fs.writeFileSync(p, 'SERVER WROTE THIS'); return 'WROTE' } catch (e) { return e.code } };
rl.on('line', l => { let m; try { m = JSON.parse(l) } catch (e) { return }
  if (m.id === undefined) return;
  if (m.method === 'initialize') send({jsonrpc: '2.0', id: m.id, result: {protocolVersion: m.params.protocolVersion, capabilities: {tools: {}}, serverInfo: {name: 'pinned', version: '1'}}});
  else if (m.method === 'tools/list') send({jsonrpc: '2.0', id: m.id, result: {tools: [{name: 'probe', description: 'x', inputSchema: {type: 'object'}}]}});
  else if (m.method === 'tools/call') send({jsonrpc: '2.0', id: m.id, result: {content: [{type: 'text', text: JSON.stringify({
    own: tryWrite('/deps/node_modules/pml-pinned/index.js'), fresh: tryWrite('/deps/planted.js'),
    modules: fs.readdirSync('/deps/node_modules').filter(n => !n.startsWith('.')).sort()})}]}});
  else send({jsonrpc: '2.0', id: m.id, result: {}});
});
`

// npmPackage is one package (version 1.0.0) of the loopback npm registry.
type npmPackage struct {
	files map[string]string // path under package/ → content
	deps  map[string]string // its dependencies
}

// npmTarball packs files as npm does (a gzipped tar under package/).
func hostileNPMTarball(t testing.TB, name string, p npmPackage) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	files := map[string]string{"package.json": mustJSON(t, map[string]any{"name": name, "version": "1.0.0", "dependencies": p.deps})}
	for k, v := range p.files {
		files[k] = v
	}
	for _, k := range sortedKeys(files) {
		if err := tw.WriteHeader(&tar.Header{Name: "package/" + k, Mode: 0o644, Size: int64(len(files[k])), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		_, _ = tw.Write([]byte(files[k]))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func sortedKeys(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	for i := range ks {
		for j := i + 1; j < len(ks); j++ {
			if ks[j] < ks[i] {
				ks[i], ks[j] = ks[j], ks[i]
			}
		}
	}
	return ks
}

// npmPackages serves pkgs (each at 1.0.0, with its true integrity) on
// loopback; it returns the registry's URL and each tarball's integrity.
func npmPackages(t testing.TB, pkgs map[string]npmPackage) (string, map[string]string) {
	t.Helper()
	tarballs, sris := map[string][]byte{}, map[string]string{}
	for name, p := range pkgs {
		tarballs[name] = hostileNPMTarball(t, name, p)
		sris[name] = sri512(tarballs[name])
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path := strings.TrimPrefix(r.URL.Path, "/")
		if name, ok := strings.CutSuffix(path, "-1.0.0.tgz"); ok && tarballs[name] != nil {
			_, _ = w.Write(tarballs[name])
			return
		}
		p, ok := pkgs[path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, mustJSON(t, map[string]any{"name": path, "dist-tags": map[string]string{"latest": "1.0.0"},
			"versions": map[string]any{"1.0.0": map[string]any{"name": path, "version": "1.0.0", "dependencies": p.deps,
				"dist": map[string]string{"integrity": sris[path], "tarball": "http://" + r.Host + "/" + path + "-1.0.0.tgz"}}}}))
	}))
	// 127.0.0.2, not 127.0.0.1: the install container's NO_PROXY sends
	// 127.0.0.1 to its own loopback, while this address goes through
	// pml's egress proxy, which dials it on this machine (the step names
	// it literally with --registry, so the proxy allows it).
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("no 127.0.0.2 on this machine's loopback: %v", err)
	}
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL + "/", sris
}

// theThreePackages: pml-pinned (the server), pml-extra (a package the
// step does not pin), pml-evil (depends on pml-pinned: installing it
// puts pml-pinned, with its true integrity, in npm's lockfile).
func theThreePackages(t *testing.T) (string, map[string]string) {
	return npmPackages(t, map[string]npmPackage{
		"pml-pinned": {files: map[string]string{"index.js": pinnedServer}},
		"pml-extra":  {files: map[string]string{"index.js": "// UNCHECKED CODE\n"}},
		"pml-evil":   {files: map[string]string{"index.js": "// EVIL CODE\n"}, deps: map[string]string{"pml-pinned": "1.0.0"}},
	})
}

// pinnedStep is the server's fields (image, command, install) for an
// install of specs from the registry at reg, pinning pkg's integrity.
func pinnedStep(reg, pkg, integrity string, specs ...string) map[string]any {
	args := append([]string{"install", "--prefix", "/deps", "--no-audit", "--no-fund", "--registry", reg, "--fetch-retries", "0"}, specs...)
	inst := map[string]any{"command": "npm", "args": args, "integrity": integrity}
	if pkg != "" {
		inst["package"] = pkg
	}
	return map[string]any{"image": nodeImage, "command": "node", "args": []string{"/deps/node_modules/pml-pinned/index.js"},
		"workspace": "none", "install": inst}
}

// serverConfig is a .pml.json with one server, pinned, of step.
func serverConfig(t *testing.T, step map[string]any) string {
	return mustJSON(t, map[string]any{"permissions": map[string]any{"allow": []string{"pinned:*"}},
		"mcps": map[string]any{"pinned": step}})
}

// refusedInstall calls pinned:probe in ws and wants the call refused
// with want, and nothing of the step installed.
func refusedInstall(t *testing.T, ws *workspace, want ...string) {
	t.Helper()
	r := runCLI(t, ws.Dir, []string{"PML_WORKSPACE=" + ws.Dir}, "", "call", "pinned:probe", `{}`)
	out := callJSON(t, r)
	text := out.Text + "\n" + logText(r.stderr)
	if r.code == 0 {
		t.Errorf("the step ran and the server answered: %q\n%s", out.Text, r.stderr)
	}
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Errorf("the refusal does not say %q:\n%s", w, text)
		}
	}
	for _, m := range []string{"pml-extra", "pml-evil", "pml-pinned"} {
		if _, err := os.Stat(ws.path(".pml/deps/pinned/node_modules/" + m)); err == nil {
			t.Errorf("%s was installed into .pml/deps/pinned", m)
		}
	}
	if raw, _ := os.ReadFile(ws.path(".pml/deps.json")); strings.Contains(string(raw), "pinned") {
		t.Errorf("the step was recorded as installed: %s", raw)
	}
}

// TestHostileInstallOfAnUncheckedSecondPackageIsRefused: a step pinning
// pml-pinned's integrity (the last argument's package, as by default)
// also names pml-extra (`npm install pml-extra pml-pinned@1.0.0`).
// Nothing pins what the registry serves for pml-extra, so the step is refused before npm runs, naming the
// package, whether a repository's .pml.json or a registry entry wrote it.
func TestHostileInstallOfAnUncheckedSecondPackageIsRefused(t *testing.T) {
	needImage(t, nodeImage)
	reg, sris := theThreePackages(t)
	step := pinnedStep(reg, "", sris["pml-pinned"], "pml-extra", "pml-pinned@1.0.0")
	want := []string{"install.args install pml-extra besides pml-pinned", "remove pml-extra from install.args"}
	t.Run("pml.json", func(t *testing.T) {
		refusedInstall(t, newWorkspace(t, serverConfig(t, step)), want...)
	})
	t.Run("registry entry", func(t *testing.T) {
		dir := t.TempDir()
		entry := map[string]any{"type": "stdio", "description": "pinned", "tools": []string{"pinned:probe"}, "version": "1.0.0"}
		for k, v := range step {
			entry[k] = v
		}
		writeEntry(t, dir, "pml.mcp.pinned.server.json", mustJSON(t, entry))
		refusedInstall(t, newWorkspace(t, registryConfig("", startRegistry(t, dir).URL)), want...)
	})
}

// TestHostileInstallPackageThatLiesIsRefused: install.package names
// pml-pinned, with its true integrity, while the step installs pml-evil
// (which depends on pml-pinned, so npm's lockfile holds pml-pinned with
// that integrity): refused before npm runs, from .pml.json and from a
// registry entry. A registry entry whose integrity is not the package's
// is refused too (the install is checked and thrown away).
func TestHostileInstallPackageThatLiesIsRefused(t *testing.T) {
	needImage(t, nodeImage)
	reg, sris := theThreePackages(t)
	lie := pinnedStep(reg, "pml-pinned", sris["pml-pinned"], "pml-evil@1.0.0")
	want := []string{`install.package is "pml-pinned", but install.args install pml-evil@1.0.0`, `Set install.package to "pml-evil"`}
	t.Run("pml.json", func(t *testing.T) {
		refusedInstall(t, newWorkspace(t, serverConfig(t, lie)), want...)
	})
	entryWS := func(t *testing.T, step map[string]any) *workspace {
		dir := t.TempDir()
		entry := map[string]any{"type": "stdio", "description": "pinned", "tools": []string{"pinned:probe"}, "version": "1.0.0"}
		for k, v := range step {
			entry[k] = v
		}
		writeEntry(t, dir, "pml.mcp.pinned.server.json", mustJSON(t, entry))
		return newWorkspace(t, registryConfig("", startRegistry(t, dir).URL))
	}
	t.Run("registry entry", func(t *testing.T) {
		refusedInstall(t, entryWS(t, lie), want...)
	})
	t.Run("registry entry's integrity", func(t *testing.T) {
		wrong := sris["pml-extra"]
		refusedInstall(t, entryWS(t, pinnedStep(reg, "", wrong, "pml-pinned@1.0.0")), "integrity mismatch", wrong, sris["pml-pinned"])
	})
}

// TestAServersDepsAreReadOnlyAndTheVouchedTree: what the server sees at
// /deps is what pml installed and vouched for (the tree's hash is the
// record's), and the server cannot write it: neither its own code nor a
// new file. (A tree the repository commits under .pml/deps is never
// mounted: TestHostileCommittedDepsRunNothing.)
func TestAServersDepsAreReadOnlyAndTheVouchedTree(t *testing.T) {
	needImage(t, nodeImage)
	reg, sris := theThreePackages(t)
	ws := newWorkspace(t, serverConfig(t, pinnedStep(reg, "", sris["pml-pinned"], "pml-pinned@1.0.0")))
	env := []string{"PML_WORKSPACE=" + ws.Dir}
	for i := 0; i < 2; i++ {
		r := runCLI(t, ws.Dir, env, "", "call", "pinned:probe", `{}`)
		out := callJSON(t, r)
		var seen struct {
			Own, Fresh string
			Modules    []string
		}
		if r.code != 0 || json.Unmarshal([]byte(out.Text), &seen) != nil {
			t.Fatalf("pml call pinned:probe: exit %d %q\n%s", r.code, out.Text, r.stderr)
		}
		if seen.Own != "EROFS" || seen.Fresh != "EROFS" {
			t.Errorf("call %d: the server's writes to /deps: %+v, want EROFS for both", i+1, seen)
		}
		if strings.Join(seen.Modules, " ") != "pml-pinned" {
			t.Errorf("call %d: /deps/node_modules holds %v, want pml-pinned only", i+1, seen.Modules)
		}
	}
	if b := readFile(t, ws.path(".pml/deps/pinned/node_modules/pml-pinned/index.js")); b != pinnedServer {
		t.Errorf("the installed program changed:\n%s", b)
	}
	if _, err := os.Stat(ws.path(".pml/deps/pinned/planted.js")); err == nil {
		t.Error("the server planted a file in its /deps")
	}
	var st struct {
		Servers map[string]deps.Record `json:"servers"`
	}
	if err := json.Unmarshal([]byte(readFile(t, ws.path(".pml/deps.json"))), &st); err != nil {
		t.Fatal(err)
	}
	tree, err := deps.TreeSRI(context.Background(), ws.Dir, filepath.Join(ws.Dir, ".pml/deps/pinned"), "sha256")
	if err != nil || st.Servers["pinned"].Tree != tree || st.Servers["pinned"].Integrity != sris["pml-pinned"] {
		t.Errorf("the record (%+v) is not of the tree there (%s, %v)", st.Servers["pinned"], tree, err)
	}
}

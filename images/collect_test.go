package images

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/pml-dev/pml/internal/config"
)

func testManifest(t *testing.T) *Manifest {
	t.Helper()
	m, err := ParseManifest([]byte(`
version: 1
images:
  - {name: toolbox, ref: "pml/toolbox:{exe}", source: local, needed: always, build: "pml builds it"}
  - {name: shell, ref: "pml/shell:busybox", source: local, needed: referenced, build: "make images"}
  - {name: node, ref: "pml/node:18", source: local, needed: referenced, build: "make images-node"}
  - {name: deno, ref: "denoland/deno:2.9.6", source: registry, needed: optional, digest: "`+fakeDigest(9)+`", build: "none"}
  - {name: tool, ref: "r.io/pml/tool:1", source: registry, needed: referenced, digest: "`+fakeDigest(1)+`", build: "none"}
`), "test")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func exeTag() (string, error) { return "0123456789abcdef", nil }

func refsOf(ws []Want) []string {
	var out []string
	for _, w := range ws {
		out = append(out, w.String())
	}
	return out
}

func TestCollectGivesOneWantPerImageWhateverNamesIt(t *testing.T) {
	servers := map[string]config.Server{
		"memory": {Name: "memory", Image: "pml/node:18"},
		"files":  {Name: "files", Image: "docker.io/pml/node:18"},
		"other":  {Name: "other", Image: "r.io/x/y:2", Private: true},
	}
	wants, err := Collect(Sources{Manifest: testManifest(t), ExeTag: exeTag, Servers: servers, ShellImage: "pml/shell:busybox",
		Lockfile: []LockImage{{FQDN: "pml.mcp.y.server.ab12", Image: "r.io/x/y:2"}}})
	if err != nil {
		t.Fatal(err)
	}
	got := refsOf(wants)
	want := []string{"pml/toolbox:0123456789abcdef", "pml/shell:busybox", "pml/node:18", "r.io/x/y:2"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("wants = %v, want %v", got, want)
	}
	node := wants[2]
	if node.Source != SourceLocal || node.Build != "make images-node" {
		t.Errorf("the manifest's entry must supply source and build: %+v", node)
	}
	if !contains(node.UsedBy, ".pml.json mcps.memory") || !contains(node.UsedBy, ".pml.json mcps.files") {
		t.Errorf("both servers must be named: %v", node.UsedBy)
	}
	y := wants[3]
	if !contains(y.UsedBy, ".pml.json private_mcps.other") || !contains(y.UsedBy, ".pml/mcp.lock pml.mcp.y.server.ab12") {
		t.Errorf("the lockfile and .pml.json reference one image: %v", y.UsedBy)
	}
	if !wants[0].Toolbox {
		t.Error("the toolbox is marked for the in-process build")
	}
}

func TestCollectLeavesOutReferencedImagesNobodyReferences(t *testing.T) {
	wants, err := Collect(Sources{Manifest: testManifest(t), ExeTag: exeTag})
	if err != nil {
		t.Fatal(err)
	}
	if got := refsOf(wants); !reflect.DeepEqual(got, []string{"pml/toolbox:0123456789abcdef"}) {
		t.Errorf("only the always-needed image: %v", got)
	}
	wants, err = Collect(Sources{Manifest: testManifest(t), ExeTag: exeTag, All: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := refsOf(wants); !contains(got, "denoland/deno:2.9.6@"+fakeDigest(9)) {
		t.Errorf("--all adds the optional images, pinned: %v", got)
	}
}

func TestCollectAppliesTheManifestPinToAReferenceByTag(t *testing.T) {
	servers := map[string]config.Server{"t": {Name: "t", Image: "r.io/pml/tool:1"}}
	wants, err := Collect(Sources{Manifest: testManifest(t), ExeTag: exeTag, Servers: servers})
	if err != nil {
		t.Fatal(err)
	}
	w := wants[1]
	if w.Pin != fakeDigest(1) || !strings.HasPrefix(w.PinnedBy, "manifest ") {
		t.Errorf("pin = %q by %q", w.Pin, w.PinnedBy)
	}
}

func TestCollectRefusesTwoPinsForOneImage(t *testing.T) {
	servers := map[string]config.Server{"t": {Name: "t", Image: "r.io/pml/tool:1@" + fakeDigest(2)}}
	_, err := Collect(Sources{Manifest: testManifest(t), ExeTag: exeTag, Servers: servers})
	if err == nil {
		t.Fatal("two digests for r.io/pml/tool:1 were accepted")
	}
	for _, s := range []string{fakeDigest(1), fakeDigest(2), ".pml.json mcps.t", "manifest tool"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not name %s", err, s)
		}
	}
}

func TestCollectFoldsADigestReferenceIntoTheTagPinnedToIt(t *testing.T) {
	servers := map[string]config.Server{
		"a": {Name: "a", Image: "r.io/pml/tool@" + fakeDigest(1)},
		"b": {Name: "b", Image: "r.io/pml/tool:1"},
	}
	wants, err := Collect(Sources{Manifest: testManifest(t), ExeTag: exeTag, Servers: servers})
	if err != nil {
		t.Fatal(err)
	}
	if got := refsOf(wants); !reflect.DeepEqual(got, []string{"pml/toolbox:0123456789abcdef", "r.io/pml/tool:1@" + fakeDigest(1)}) {
		t.Errorf("wants = %v", got)
	}
	if u := wants[1].UsedBy; !contains(u, ".pml.json mcps.a") || !contains(u, ".pml.json mcps.b") {
		t.Errorf("used by = %v", u)
	}
}

func TestCollectNamesTheBadReference(t *testing.T) {
	_, err := Collect(Sources{Servers: map[string]config.Server{"bad": {Name: "bad", Image: "Not An Image"}}})
	if err == nil || !strings.Contains(err.Error(), ".pml.json mcps.bad") {
		t.Errorf("err = %v", err)
	}
}

func writeFile(t *testing.T, p, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLockfileImagesComeFromTheCachedMetadata(t *testing.T) {
	ws := t.TempDir()
	writeFile(t, filepath.Join(ws, ".pml", "mcp.lock"), `{"version": 1, "entries": {
  "pml.mcp.memory.server": {"fqdn": "pml.mcp.memory.server.ab12", "integrity": "sha256-x", "type": "stdio", "routing": "client"},
  "pml.mcp.nocache.server": {"fqdn": "pml.mcp.nocache.server.cd34", "integrity": "sha256-x", "type": "stdio", "routing": "client"},
  "pml.mcp.direct.server": {"fqdn": "pml.mcp.direct.server.ef56", "type": "stdio", "image": "r.io/direct:1"},
  "casys.pml.fs.read_json": {"fqdn": "casys.pml.fs.read_json.a7f3", "integrity": "sha256-x", "type": "deno", "routing": "client"}}}`)
	// The registry client caches the served body base64-encoded.
	writeFile(t, filepath.Join(ws, ".pml", "registry-cache", "pml.mcp.memory.server.json"),
		`{"fqdn": "pml.mcp.memory.server.ab12", "body": "eyJ0eXBlIjoic3RkaW8iLCJpbWFnZSI6InBtbC9ub2RlOjE4In0="}`)
	got, warnings, err := LockfileImages(ws)
	if err != nil {
		t.Fatal(err)
	}
	want := []LockImage{{FQDN: "pml.mcp.direct.server.ef56", Image: "r.io/direct:1"}, {FQDN: "pml.mcp.memory.server.ab12", Image: "pml/node:18"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("images = %+v, want %+v", got, want)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "pml.mcp.nocache.server.cd34") {
		t.Errorf("an entry without cached metadata is a warning naming it: %v", warnings)
	}
}

func TestLockfileImagesRefusesACorruptLockfileAndNeverRewritesIt(t *testing.T) {
	ws := t.TempDir()
	p := filepath.Join(ws, ".pml", "mcp.lock")
	writeFile(t, p, `{"version": 1, "entries": {`)
	_, _, err := LockfileImages(ws)
	if err == nil || !strings.Contains(err.Error(), p) {
		t.Fatalf("err = %v", err)
	}
	if b, _ := os.ReadFile(p); string(b) != `{"version": 1, "entries": {` {
		t.Error("the lockfile was changed")
	}
	if imgs, _, err := LockfileImages(t.TempDir()); err != nil || imgs != nil {
		t.Errorf("no lockfile is no images: %v %v", imgs, err)
	}
}

func TestLockfileKeysCannotEscapeTheCache(t *testing.T) {
	ws := t.TempDir()
	writeFile(t, filepath.Join(ws, ".pml", "mcp.lock"), `{"version": 1, "entries": {
  "../../etc/x.y.z": {"fqdn": "a.b.c.d.e", "type": "stdio"}}}`)
	got, warnings, err := LockfileImages(ws)
	if err != nil || len(got) != 0 || len(warnings) != 1 {
		t.Errorf("got %v %v %v", got, warnings, err)
	}
}

func TestADigestReferenceBringsInTheManifestEntryPinnedToIt(t *testing.T) {
	servers := map[string]config.Server{"a": {Name: "a", Image: "r.io/pml/tool@" + fakeDigest(1)}}
	wants, err := Collect(Sources{Manifest: testManifest(t), ExeTag: exeTag, Servers: servers})
	if err != nil {
		t.Fatal(err)
	}
	if got := refsOf(wants); !reflect.DeepEqual(got, []string{"pml/toolbox:0123456789abcdef", "r.io/pml/tool:1@" + fakeDigest(1)}) {
		t.Errorf("wants = %v", got)
	}
}

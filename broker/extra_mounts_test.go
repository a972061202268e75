package broker

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pml-dev/pml/internal/container"
)

// outsideDir is a directory beyond the workspace, with one file.
func outsideDir(t *testing.T, content string) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "f.txt"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return d
}

// mountsOf are the mounts of the containers started for purpose.
func mountsOf(f *fixture, purpose string) [][]container.Mount {
	var out [][]container.Mount
	for _, p := range f.rt.Procs() {
		if p.Spec.Labels[container.LabelPurpose] == purpose {
			out = append(out, p.Spec.Mounts)
		}
	}
	return out
}

func hasMount(ms []container.Mount, want container.Mount) bool {
	for _, m := range ms {
		if m == want {
			return true
		}
	}
	return false
}

func TestTheProjectsMountsGoIntoToolAndServerContainers(t *testing.T) {
	data, own := outsideDir(t, "granted"), outsideDir(t, "own")
	pml, _ := json.Marshal(map[string]any{
		"permissions": map[string]any{"allow": []string{"*"}},
		"sandbox":     map[string]any{"mounts": []any{data}},
		"mcps": map[string]any{
			"fake":  map[string]any{"image": "fake-image", "sandbox": map[string]any{"mounts": []any{map[string]any{"source": own, "target": "/own"}}}},
			"other": map[string]any{"image": "fake-image"},
			"once":  map[string]any{"image": "fake-image", "lifetime": "per_call", "sandbox": map[string]any{"mounts": []any{map[string]any{"source": own, "target": "/own"}}}},
		},
	})
	f := newFixture(t, string(pml))
	ro := container.Mount{Source: data, Target: data, ReadOnly: true}

	if r := f.call(t, "filesystem:read_file", map[string]any{"path": filepath.Join(data, "f.txt")}); r.IsError || r.Text != "granted" {
		t.Fatalf("read_file in the mount: %+v", r)
	}
	if r := f.call(t, "filesystem:write_file", map[string]any{"path": filepath.Join(data, "new.txt"), "content": "x"}); !r.IsError || !strings.Contains(r.Text, "read-only mount "+data) {
		t.Fatalf("write_file in the read-only mount: %+v", r)
	}
	if r := f.call(t, "shell:exec", map[string]any{"command": "ls"}); r.IsError {
		t.Fatalf("shell:exec: %+v", r)
	}
	if r := f.call(t, "fake:echo", map[string]any{"text": "hi"}); r.IsError {
		t.Fatalf("fake:echo: %+v", r)
	}
	if r := f.call(t, "other:echo", map[string]any{"text": "hi"}); r.IsError {
		t.Fatalf("other:echo: %+v", r)
	}
	if r := f.call(t, "once:echo", map[string]any{"text": "hi"}); r.IsError {
		t.Fatalf("once:echo: %+v", r)
	}
	ownMount := container.Mount{Source: own, Target: "/own", ReadOnly: true}
	for _, purpose := range []string{"pool:toolbox", "pool:shell", "mcp:fake", "mcp:other", "pool:mcp:once"} {
		specs := mountsOf(f, purpose)
		if len(specs) == 0 {
			t.Fatalf("no %s container started", purpose)
		}
		for _, ms := range specs {
			if !hasMount(ms, ro) {
				t.Errorf("%s: the project's mount is missing: %+v", purpose, ms)
			}
			if hasMount(ms, ownMount) != (purpose == "mcp:fake" || purpose == "pool:mcp:once") {
				t.Errorf("%s: the server fake's own mount: %+v", purpose, ms)
			}
		}
	}
}

func TestAMountThatIsGoneIsAClearErrorAndNoContainer(t *testing.T) {
	data := outsideDir(t, "x")
	pml, _ := json.Marshal(map[string]any{"permissions": map[string]any{"allow": []string{"*"}}, "sandbox": map[string]any{"mounts": []any{data}}})
	f := newFixture(t, string(pml))
	if err := os.RemoveAll(data); err != nil {
		t.Fatal(err)
	}
	r := f.call(t, "filesystem:read_file", map[string]any{"path": "a.txt"})
	if !r.IsError || !strings.Contains(r.Text, data+" (sandbox.mounts) is not on this host any more") || !strings.Contains(r.Text, "remove it from sandbox.mounts") {
		t.Fatalf("got %+v", r)
	}
	if n := len(mountsOf(f, "pool:toolbox")); n != 0 {
		t.Fatalf("%d containers started", n)
	}
	if r := f.call(t, "shell:exec", map[string]any{"command": "ls"}); !r.IsError || !strings.Contains(r.Text, "not on this host any more") {
		t.Fatalf("shell:exec: %+v", r)
	}
}

func TestALinkInAGrantedDirectoryDoesNotWidenIt(t *testing.T) {
	data, secret := outsideDir(t, "x"), outsideDir(t, "secret")
	if err := os.Symlink(secret, filepath.Join(data, "keys")); err != nil {
		t.Fatal(err)
	}
	pml, _ := json.Marshal(map[string]any{"permissions": map[string]any{"allow": []string{"*"}}, "sandbox": map[string]any{"mounts": []any{data}}})
	f := newFixture(t, string(pml))
	r := f.call(t, "filesystem:read_file", map[string]any{"path": filepath.Join(data, "keys", "f.txt")})
	if !r.IsError || !strings.Contains(r.Text, "leads outside the extra mount "+data) {
		t.Fatalf("got %+v", r)
	}
}

func TestAReloadThatTakesAMountAwayRestartsTheServersWithout(t *testing.T) {
	data := outsideDir(t, "x")
	with, _ := json.Marshal(map[string]any{"permissions": map[string]any{"allow": []string{"*"}}, "sandbox": map[string]any{"mounts": []any{data}}, "mcps": map[string]any{"fake": map[string]any{"image": "fake-image"}}})
	f := newFixture(t, string(with))
	if r := f.call(t, "fake:echo", map[string]any{"text": "hi"}); r.IsError {
		t.Fatalf("fake:echo: %+v", r)
	}
	without, _ := json.Marshal(map[string]any{"permissions": map[string]any{"allow": []string{"*"}}, "mcps": map[string]any{"fake": map[string]any{"image": "fake-image"}}})
	if err := os.WriteFile(filepath.Join(f.ws, ".pml.json"), without, 0o644); err != nil {
		t.Fatal(err)
	}
	f.b.Reload(func(string) string { return "" })
	if r := f.call(t, "fake:echo", map[string]any{"text": "hi"}); r.IsError {
		t.Fatalf("fake:echo after the reload: %+v", r)
	}
	specs := mountsOf(f, "mcp:fake")
	if len(specs) != 2 || !hasMount(specs[0], container.Mount{Source: data, Target: data, ReadOnly: true}) || hasMount(specs[1], container.Mount{Source: data, Target: data, ReadOnly: true}) {
		t.Fatalf("the server's containers' mounts: %+v", specs)
	}
	if r := f.call(t, "filesystem:read_file", map[string]any{"path": filepath.Join(data, "f.txt")}); !r.IsError || !strings.Contains(r.Text, "outside the workspace") {
		t.Fatalf("read_file in the mount taken away: %+v", r)
	}
}

// A source reached through a link in the workspace is one a container
// could re-point: the filesystem tools refuse it as the containers do,
// before any container, naming the mount.
func TestAMountThroughTheWorkspaceIsRefusedToTheFilesystemTools(t *testing.T) {
	data := outsideDir(t, "granted")
	via := filepath.Join(outsideDir(t, "x"), "via")
	f := newFixture(t, `{"permissions": {"allow": ["*"]}}`)
	hop := filepath.Join(f.ws, "hop")
	if err := os.Symlink(data, hop); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(hop, via); err != nil {
		t.Fatal(err)
	}
	pml, _ := json.Marshal(map[string]any{"permissions": map[string]any{"allow": []string{"*"}}, "sandbox": map[string]any{"mounts": []any{map[string]any{"source": via, "target": "/via"}}}})
	if err := os.WriteFile(filepath.Join(f.ws, ".pml.json"), pml, 0o644); err != nil {
		t.Fatal(err)
	}
	f.b.Reload(func(string) string { return "" })
	r := f.call(t, "filesystem:read_file", map[string]any{"path": "/via/f.txt"})
	if !r.IsError || strings.Contains(r.Text, "granted") || !strings.Contains(r.Text, via+", which now leads to "+data+", (sandbox.mounts) cannot be mounted: it is inside the workspace") {
		t.Fatalf("got %+v", r)
	}
	if n := len(mountsOf(f, "pool:toolbox")); n != 0 {
		t.Fatalf("%d toolbox containers started", n)
	}
}

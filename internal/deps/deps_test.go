package deps

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/sri"
)

func TestNPMIntegrityComesFromTheLockfile(t *testing.T) {
	dir := t.TempDir()
	lock := `{"packages": {"node_modules/@scope/pkg": {"version": "1.0.0", "integrity": "sha512-abc=="}}}`
	if err := os.MkdirAll(filepath.Join(dir, "node_modules"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "node_modules", ".package-lock.json"), []byte(lock), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Integrity(context.Background(), dir, dir, &config.Install{Command: "npm", Package: "@scope/pkg", Integrity: "sha512-x"})
	if err != nil || got != "sha512-abc==" {
		t.Fatalf("got %q, %v", got, err)
	}
	if _, err := Integrity(context.Background(), dir, dir, &config.Install{Command: "npm", Package: "@other/pkg"}); err == nil || !strings.Contains(err.Error(), "did not install @other/pkg") {
		t.Fatalf("missing package: %v", err)
	}
}

func TestTreeSRIChangesWithContent(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a"), []byte("one"), 0o644); err != nil {
		t.Fatal(err)
	}
	first, err := TreeSRI(context.Background(), dir, dir, "sha256")
	if err != nil || !strings.HasPrefix(first, "sha256-") || sri.Check(first) != nil {
		t.Fatalf("%q %v", first, err)
	}
	again, _ := TreeSRI(context.Background(), dir, dir, "sha256")
	if again != first {
		t.Fatal("not deterministic")
	}
	if err := os.WriteFile(filepath.Join(dir, "a"), []byte("two"), 0o644); err != nil {
		t.Fatal(err)
	}
	if changed, _ := TreeSRI(context.Background(), dir, dir, "sha256"); changed == first {
		t.Fatal("a changed file kept the digest")
	}
}

func TestInstalledFollowsTheRecordAndTheSpec(t *testing.T) {
	ws := t.TempDir()
	s := NewStore(ws)
	srv := config.Server{Name: "m", Image: "img", Install: &config.Install{Command: "npm", Args: []string{"install", "p@1"}, Integrity: "sha512-x", Package: "p"}}
	if s.Installed(srv) {
		t.Fatal("installed before any install")
	}
	if err := os.MkdirAll(s.Dir("m"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := s.record(context.Background(), srv, s.Dir(srv.Name), srv.Install.Integrity, "", "", nil); err != nil {
		t.Fatal(err)
	}
	if !s.Installed(srv) {
		t.Fatal("not installed after record")
	}
	srv.Install.Args = []string{"install", "p@2"}
	if s.Installed(srv) {
		t.Fatal("a changed install step still counts as installed")
	}
	if st, _ := os.Stat(filepath.Join(ws, ".pml", "deps.json")); st == nil {
		t.Fatal("no deps.json")
	}
}

func TestUnreachableRegistryIsRecognised(t *testing.T) {
	out := "npm error code EAI_AGAIN\nnpm error request to https://registry.npmjs.org/x failed, reason: getaddrinfo EAI_AGAIN registry.npmjs.org"
	if !unreachable(out) || firstMatch(out) != "EAI_AGAIN" {
		t.Fatal("EAI_AGAIN not recognised")
	}
	if unreachable("npm error 404 Not Found") {
		t.Fatal("a 404 is not a network problem")
	}
}

func TestHashingFollowsNoLinkAndStopsWithTheContext(t *testing.T) {
	ws := t.TempDir()
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(ws, ".pml"), 0o755); err != nil {
		t.Fatal(err)
	}
	// .pml/deps is a link to a directory outside: refused, not hashed.
	if err := os.Symlink(outside, filepath.Join(ws, ".pml", "deps")); err != nil {
		t.Fatal(err)
	}
	if _, err := TreeSRI(context.Background(), ws, filepath.Join(ws, ".pml", "deps"), "sha256"); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("a linked cache directory: %v", err)
	}
	s := NewStore(ws)
	if s.Installed(config.Server{Name: "x", Install: &config.Install{Command: "true"}}) {
		t.Error("a linked cache directory counts as installed")
	}
	dir := filepath.Join(ws, "tree")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a"), []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := TreeSRI(ctx, ws, dir, "sha256"); err == nil {
		t.Error("hashing went on after its context ended")
	}
}

func TestStatusTellsMissingOutdatedAndInstalled(t *testing.T) {
	ws := t.TempDir()
	s := NewStore(ws)
	if got := s.Status(config.Server{Name: "plain"}); got != StatusNone {
		t.Errorf("a server without install: %q", got)
	}
	srv := config.Server{Name: "m", Image: "img", Install: &config.Install{Command: "npm", Args: []string{"install", "p@1"}, Integrity: "sha512-x", Package: "p"}}
	if got := s.Status(srv); got != StatusMissing {
		t.Errorf("before any install: %q", got)
	}
	if err := os.MkdirAll(s.Dir("m"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := s.record(context.Background(), srv, s.Dir(srv.Name), srv.Install.Integrity, "", "", nil); err != nil {
		t.Fatal(err)
	}
	if got := s.Status(srv); got != StatusInstalled {
		t.Errorf("after the install: %q", got)
	}
	changed := srv
	changed.Install = &config.Install{Command: "npm", Args: []string{"install", "p@1"}, Integrity: "sha512-y", Package: "p"}
	if got := s.Status(changed); got != StatusOutdated {
		t.Errorf("with another integrity pinned: %q", got)
	}
	if err := os.RemoveAll(s.Dir("m")); err != nil {
		t.Fatal(err)
	}
	if got := s.Status(srv); got != StatusMissing {
		t.Errorf("with its directory removed: %q", got)
	}
}

// The seeds' unpinned npm packages are resolved at their first install.
func TestUnpinnedIsAnNPMPackageWithoutAnExactVersionOrIntegrity(t *testing.T) {
	for spec, want := range map[string]bool{
		"@scope/server":        true,
		"@scope/server@latest": true,
		"@scope/server@^1.2":   true,
		"@scope/server@1.2.3":  false,
	} {
		inst := &config.Install{Command: "npm", Args: []string{"install", "--prefix", "/deps", spec}, Package: "@scope/server"}
		if got := Unpinned(inst); got != want {
			t.Errorf("Unpinned(%s) = %v", spec, got)
		}
		inst.Integrity = "sha512-x"
		if Unpinned(inst) {
			t.Errorf("%s with an integrity is pinned by it", spec)
		}
	}
}

// TestCheckPinnedRefusesAnUncheckedPackage: an npm step installs the one
// package whose integrity is checked, and nothing else.
func TestCheckPinnedRefusesAnUncheckedPackage(t *testing.T) {
	step := func(pkg string, args ...string) *config.Install {
		return &config.Install{Command: "npm", Args: args, Package: pkg, Integrity: "sha512-x"}
	}
	for _, c := range []struct {
		inst *config.Install
		want string // "" when accepted
	}{
		{step("a", "install", "--prefix", "/deps", "--no-audit", "a@1.0.0"), ""},
		{step("@s/a", "install", "--registry", "http://127.0.0.1:9/", "--fetch-retries", "0", "@s/a@1.0.0"), ""},
		{&config.Install{Command: "pip", Args: []string{"install", "a", "b"}}, ""},
		{step("a", "install", "b", "a@1.0.0"), "install.args install b besides a"},
		{step("a", "install", "a@1.0.0", "--no-fund", "b@2"), "remove b@2 from install.args"},
		{step("a", "install", "b@1.0.0"), `install.package is "a", but install.args install b@1.0.0`},
		{step("a", "install", "--unknown-option", "x", "a@1.0.0"), "install.args install x besides a"},
		{step("a", "install", "a@1.0.0", "a@2.0.0"), "name a 2 times"},
		{step("a", "install"), "names no package"},
	} {
		err := CheckPinned("srv", c.inst)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q: refused: %v", c.inst.Args, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%q: %v, want an error saying %q", c.inst.Args, err, c.want)
		}
	}
}

// Install writes the record with the tree hashed in the partial
// directory, then renames it into place: a pml killed between the two
// leaves a record whose directory is absent, which is not installed (and
// is installed again); once renamed, a fresh process (a new Store) finds
// the tree it recorded.
func TestARecordWrittenBeforeItsRenameIsInstalledOnlyOnceRenamed(t *testing.T) {
	ws := t.TempDir()
	s := NewStore(ws)
	srv := config.Server{Name: "m", Image: "img", Install: &config.Install{Command: "npm", Args: []string{"install", "p@1"}, Integrity: "sha512-x", Package: "p"}}
	dir, finish, err := s.beginPartial(srv.Name)
	if err != nil {
		t.Fatal(err)
	}
	defer finish()
	if err := os.MkdirAll(filepath.Join(dir, "node_modules", "p"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "node_modules", "p", "index.js"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("p/index.js", filepath.Join(dir, "node_modules", "bin")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.record(context.Background(), srv, dir, srv.Install.Integrity, "", "", nil); err != nil {
		t.Fatal(err)
	}
	// The kill point: recorded, not renamed.
	if s.Installed(srv) || NewStore(ws).Installed(srv) {
		t.Fatal("a record whose directory is absent counts as installed")
	}
	if got := NewStore(ws).Status(srv); got != StatusMissing {
		t.Fatalf("status of a record whose directory is absent: %s", got)
	}
	if err := os.Rename(dir, s.Dir(srv.Name)); err != nil {
		t.Fatal(err)
	}
	fresh := NewStore(ws)
	if !fresh.Installed(srv) {
		t.Fatal("the tree hashed before its rename does not match after it")
	}
}

//go:build linux && release

package release

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// olderPml builds this checkout's pml as release v0.0.0 (older than any
// snapshot: a snapshot is the next patch after the last tag) into a new
// directory, as install.sh would have put it.
func olderPml(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "pml")
	env := append(os.Environ(), "CGO_ENABLED=0")
	r := run(t, repoRoot(t), env, "go", "build", "-trimpath", "-ldflags", "-s -w -X main.version=0.0.0 -X main.commit=old", "-o", out, "./cmd/pml")
	if r.code != 0 {
		t.Fatalf("building the older pml: %s", r.stderr)
	}
	return out
}

func TestUpgradeFromAnOlderReleaseToTheSnapshot(t *testing.T) {
	url := releases(t, dist, tag())
	home := t.TempDir()
	env := userEnv(home, "PML_RELEASES_URL="+url)
	pml := olderPml(t)

	r := run(t, home, env, pml, "upgrade", "--check")
	if r.code != 10 || !strings.Contains(r.stdout, "A newer release exists: "+tag()+" (this pml is v0.0.0)") {
		t.Fatalf("upgrade --check: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// --format json: the same answer for scripts, the same exit code.
	r = run(t, home, env, pml, "upgrade", "--check", "--format", "json")
	var j struct {
		Current, Latest, InstalledBy string
		UpToDate                     bool `json:"up_to_date"`
		Upgraded                     bool
	}
	if err := json.Unmarshal([]byte(r.stdout), &j); r.code != 10 || err != nil || j.Current != "v0.0.0" || j.Latest != tag() || j.UpToDate || j.Upgraded {
		t.Fatalf("upgrade --check --format json: exit %d, %v %+v\n%s%s", r.code, err, j, r.stdout, r.stderr)
	}
	r = run(t, home, env, pml, "upgrade")
	if r.code != 0 || r.stdout != "✓ Upgraded from v0.0.0 to "+tag()+"\n" {
		t.Fatalf("upgrade: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// stderr is a pipe: what the download's checks are is a JSON event.
	for _, l := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
		if l != "" && !json.Valid([]byte(l)) {
			t.Errorf("upgrade: a stderr line that is not JSON: %q", l)
		}
	}
	if v := run(t, home, env, pml, "version"); !strings.HasPrefix(v.stdout, "pml "+tag()+" ") {
		t.Fatalf("after the upgrade pml version says %q %s", v.stdout, v.stderr)
	}
	if ents, _ := os.ReadDir(filepath.Dir(pml)); len(ents) != 1 {
		t.Errorf("the upgrade left files beside pml: %v", ents)
	}
	for _, args := range [][]string{{"upgrade"}, {"upgrade", "--check"}} {
		r = run(t, home, env, pml, args...)
		if r.code != 0 || !strings.HasPrefix(r.stdout, "✓ Already up to date ("+tag()) {
			t.Fatalf("pml %v again: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
	}
	r = run(t, home, env, pml, "upgrade", "--format", "json")
	j = struct {
		Current, Latest, InstalledBy string
		UpToDate                     bool `json:"up_to_date"`
		Upgraded                     bool
	}{}
	if err := json.Unmarshal([]byte(r.stdout), &j); r.code != 0 || err != nil || j.Current != tag() || !j.UpToDate || j.Upgraded {
		t.Fatalf("upgrade --format json when up to date: exit %d, %v %+v\n%s%s", r.code, err, j, r.stdout, r.stderr)
	}
	firstCall(t, pml, home)
}

func TestUpgradeKeepsTheOldPmlWhenTheArchiveIsTampered(t *testing.T) {
	d := copyDist(t)
	tamper(t, filepath.Join(d, "pml_linux_amd64.tar.gz"))
	url := releases(t, d, tag())
	home := t.TempDir()
	pml := olderPml(t)
	before := sha256File(t, pml)

	r := run(t, home, userEnv(home, "PML_RELEASES_URL="+url), pml, "upgrade")
	if r.code != 1 || !strings.Contains(r.stderr, "pml_linux_amd64.tar.gz does not match its checksum in checksums.txt") || !strings.Contains(r.stderr, "this pml was left as it was") {
		t.Fatalf("upgrade: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if sha256File(t, pml) != before {
		t.Error("a refused upgrade changed pml")
	}
	if ents, _ := os.ReadDir(filepath.Dir(pml)); len(ents) != 1 {
		t.Errorf("a refused upgrade left files beside pml: %v", ents)
	}
	if v := run(t, home, userEnv(home), pml, "version"); !strings.HasPrefix(v.stdout, "pml v0.0.0 (old) ") {
		t.Errorf("pml version after a refused upgrade: %q", v.stdout)
	}
}

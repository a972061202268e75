package cicheck

import (
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rhysd/actionlint"
	"go.yaml.in/yaml/v3"
)

const workflowsDir = "../../.github/workflows"

// lint runs actionlint (the version go.mod pins, as make vet runs it) on
// one workflow's content; shellcheck is left out so that the result does
// not depend on what the machine has installed (make vet uses it when it
// is on PATH).
func lint(t *testing.T, path string, content []byte) []*actionlint.Error {
	t.Helper()
	l, err := actionlint.NewLinter(io.Discard, &actionlint.LinterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	errs, err := l.Lint(path, content, nil)
	if err != nil {
		t.Fatal(err)
	}
	return errs
}

func workflows(t *testing.T) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, name := range []string{"ci.yml", "release.yml"} {
		b, err := os.ReadFile(filepath.Join(workflowsDir, name))
		if err != nil {
			t.Fatal(err)
		}
		out[name] = b
	}
	return out
}

func TestTheWorkflowsPassActionlint(t *testing.T) {
	for name, b := range workflows(t) {
		for _, e := range lint(t, filepath.Join(workflowsDir, name), b) {
			t.Errorf("%s:%d:%d: %s [%s]", name, e.Line, e.Column, e.Message, e.Kind)
		}
	}
}

// TestActionlintFailsABrokenWorkflow: the check make vet runs is not a
// formality: each of these breakages of the release workflow is an error.
func TestActionlintFailsABrokenWorkflow(t *testing.T) {
	b := string(workflows(t)["release.yml"])
	for _, tc := range []struct{ name, old, new, want string }{
		{"a job that needs no such job", "needs: check", "needs: checks", `job "release" needs job "checks" which does not exist`},
		{"an unknown permission", "id-token: write", "id-tokens: write", `unknown permission scope "id-tokens"`},
		{"an unknown context", "secrets.GITHUB_TOKEN", "secret.GITHUB_TOKEN", `undefined variable "secret"`},
		{"an unknown event", "push:\n    tags:", "pushed:\n    tags:", `unknown Webhook event "pushed"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(b, tc.old) {
				t.Fatalf("release.yml has no %q to break", tc.old)
			}
			errs := lint(t, filepath.Join(t.TempDir(), "release.yml"), []byte(strings.Replace(b, tc.old, tc.new, 1)))
			var msgs []string
			for _, e := range errs {
				msgs = append(msgs, e.Message)
			}
			if !strings.Contains(strings.Join(msgs, "\n"), tc.want) {
				t.Errorf("actionlint said %q, want an error containing %q", msgs, tc.want)
			}
		})
	}
}

// TestActionsArePinnedByCommit: a tag can be moved to other code after
// review; a commit cannot. Each uses: names a full commit and, in a
// comment, the version that commit is.
func TestActionsArePinnedByCommit(t *testing.T) {
	uses := regexp.MustCompile(`(?m)^\s*(?:-\s+)?uses:\s*(\S+)(.*)$`)
	pinned := regexp.MustCompile(`^[\w.-]+/[\w./-]+@[0-9a-f]{40}$`)
	version := regexp.MustCompile(`^\s+#\s+v\d+\.\d+\.\d+$`)
	for name, b := range workflows(t) {
		m := uses.FindAllStringSubmatch(string(b), -1)
		if len(m) == 0 {
			t.Errorf("%s uses no action: the check found nothing to check", name)
		}
		for _, u := range m {
			if !pinned.MatchString(u[1]) || !version.MatchString(u[2]) {
				t.Errorf("%s: uses: %s%s: want owner/repo@<40 hex digits> # vX.Y.Z", name, u[1], u[2])
			}
		}
	}
}

type workflow struct {
	Permissions any `yaml:"permissions"`
	Jobs        map[string]struct {
		Permissions    map[string]string `yaml:"permissions"`
		TimeoutMinutes int               `yaml:"timeout-minutes"`
		Steps          []struct {
			Uses string `yaml:"uses"`
			Run  string `yaml:"run"`
		} `yaml:"steps"`
	} `yaml:"jobs"`
}

func parse(t *testing.T, b []byte) workflow {
	t.Helper()
	var w workflow
	if err := yaml.Unmarshal(b, &w); err != nil {
		t.Fatal(err)
	}
	return w
}

// TestWorkflowsHaveLeastPermissions: CI only reads; the release workflow
// grants nothing by default, and only its release job may write the
// repository (the GitHub release) and get an OIDC token (cosign's
// keyless signature). Every job has a timeout.
func TestWorkflowsHaveLeastPermissions(t *testing.T) {
	ws := workflows(t)
	ci := parse(t, ws["ci.yml"])
	if p, ok := ci.Permissions.(map[string]any); !ok || len(p) != 1 || p["contents"] != "read" {
		t.Errorf("ci.yml: permissions %v, want contents: read alone", ci.Permissions)
	}
	rel := parse(t, ws["release.yml"])
	if p, ok := rel.Permissions.(map[string]any); !ok || len(p) != 0 {
		t.Errorf("release.yml: top-level permissions %v, want {}", rel.Permissions)
	}
	for name, w := range map[string]workflow{"ci.yml": ci, "release.yml": rel} {
		for job, j := range w.Jobs {
			if j.TimeoutMinutes <= 0 {
				t.Errorf("%s: job %s has no timeout-minutes", name, job)
			}
			for scope, level := range j.Permissions {
				if level == "read" || level == "none" {
					continue
				}
				if name != "release.yml" || job != "release" || (scope != "contents" && scope != "id-token") {
					t.Errorf("%s: job %s may %s %s; only release.yml's release job writes (contents, id-token)", name, job, level, scope)
				}
			}
		}
	}
	j := rel.Jobs["release"]
	if j.Permissions["contents"] != "write" || j.Permissions["id-token"] != "write" {
		t.Errorf("release.yml's release job: permissions %v, want contents: write and id-token: write", j.Permissions)
	}
}

// TestTheWorkflowsRunTheProjectsOwnCommands: CI is .ci/run, the release is
// make release after the fast checks, with cosign installed for signing.
func TestTheWorkflowsRunTheProjectsOwnCommands(t *testing.T) {
	ws := workflows(t)
	runs := func(w workflow, job string) (runs, uses []string) {
		for _, s := range w.Jobs[job].Steps {
			runs = append(runs, s.Run)
			uses = append(uses, s.Uses)
		}
		return runs, uses
	}
	r, _ := runs(parse(t, ws["ci.yml"]), "run")
	if !strings.Contains(strings.Join(r, "\n"), "bash .ci/run") {
		t.Errorf("ci.yml does not run bash .ci/run: %q", r)
	}
	rel := parse(t, ws["release.yml"])
	r, _ = runs(rel, "check")
	for _, want := range []string{"make vet", "make fmt-check", "make unit"} {
		if !strings.Contains(strings.Join(r, "\n"), want) {
			t.Errorf("release.yml's check job does not run %s: %q", want, r)
		}
	}
	r, u := runs(rel, "release")
	if !strings.Contains(strings.Join(r, "\n"), "make release") || !strings.Contains(strings.Join(u, "\n"), "sigstore/cosign-installer@") {
		t.Errorf("release.yml's release job: runs %q, uses %q; want make release with cosign installed", r, u)
	}
}

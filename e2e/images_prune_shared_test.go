//go:build linux

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
)

// TestImagesPruneOnASharedEngine: a user with a fresh HOME, in a project
// with nothing, on an engine other users' projects share (issue 41, item
// 8). prune --dry-run lists neither pml's base images (what pml built as
// node or toolbox, of any version) nor an image pml pulled for this user
// that another project's container uses; it says what it keeps and for
// whom, and still lists what nothing uses. Run from the home directory it
// makes no project of it: no ~/.pml, and projects.json does not name ~
// (nor after a pull there).
func TestImagesPruneOnASharedEngine(t *testing.T) {
	cli := imagesEngine(t)
	ctx := context.Background()
	prefix := "pml-e2e-prune-shared-" + imgNonce(t) + "/"
	mine := map[string]string{"pml-e2e": "prune-shared"}
	label := func(extra map[string]string) map[string]string {
		l := map[string]string{}
		for k, v := range mine {
			l[k] = v
		}
		for k, v := range extra {
			l[k] = v
		}
		return l
	}
	importTestImage(t, cli, prefix+"node:18", "", label(map[string]string{"pml.image": "node"}))
	importTestImage(t, cli, prefix+"toolbox:0123456789abcdef", "", label(map[string]string{"pml.image": "toolbox"}))
	used := importTestImage(t, cli, prefix+"server:1", "", label(nil))
	unused := importTestImage(t, cli, prefix+"gone:1", "", label(nil))

	// Another user's project runs a container of the image (stopped is
	// enough: the engine keeps it for that container).
	other := "/srv/other-user/project"
	c, err := cli.ContainerCreate(ctx, &container.Config{Image: used, Cmd: []string{"/x"},
		Labels: label(map[string]string{"pml.workspace": other})}, nil, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true}) })

	// This user's pml pulled both images (as pml records it).
	home, _ := filepath.EvalSymlinks(t.TempDir())
	state := filepath.Join(home, ".local", "state", "pml")
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Format(time.RFC3339)
	rec, _ := json.Marshal(map[string]any{"version": 1, "projects": map[string]any{}, "pulled": map[string]any{
		used:   map[string]any{"refs": []string{prefix + "server:1"}, "at": now},
		unused: map[string]any{"refs": []string{prefix + "gone:1"}, "at": now},
	}})
	if err := os.WriteFile(filepath.Join(state, "projects.json"), rec, 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(dir string, args ...string) (string, string, int) {
		t.Helper()
		cmd := exec.Command(pmlBin, args...)
		cmd.Dir = dir
		for _, e := range os.Environ() {
			if !strings.HasPrefix(e, "PML_WORKSPACE=") && !strings.HasPrefix(e, "XDG_STATE_HOME=") && !strings.HasPrefix(e, "HOME=") {
				cmd.Env = append(cmd.Env, e)
			}
		}
		cmd.Env = append(cmd.Env, "HOME="+home)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return stdout.String(), stderr.String(), code
	}

	ws := newWorkspace(t, "")
	stdout, stderr, code := run(ws.Dir, "images", "prune", "--dry-run")
	if code != 0 {
		t.Fatalf("prune --dry-run: exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, never := range []string{"would remove pml/node:", "would remove pml/toolbox:", "would remove pml/shell:", "would remove pml/deno:",
		"would remove " + prefix + "node:", "would remove " + prefix + "toolbox:", "would remove " + prefix + "server:"} {
		if strings.Contains(stdout, never) {
			t.Errorf("dry run: %q\n%s", never, stdout)
		}
	}
	if !strings.Contains(stdout, "would remove "+prefix+"gone:1") {
		t.Errorf("dry run does not list the image nothing uses:\n%s", stdout)
	}
	for _, kept := range []string{"kept " + prefix + "node:18", "kept " + prefix + "toolbox:0123456789abcdef"} {
		if !strings.Contains(stdout, kept) || !strings.Contains(stdout, "remove it with --include-base") {
			t.Errorf("dry run does not say it keeps %s and why:\n%s", kept, stdout)
		}
	}
	if !strings.Contains(stdout, "kept "+prefix+"server:1") || !strings.Contains(stdout, "of project "+other) {
		t.Errorf("dry run does not say it keeps server:1 for %s:\n%s", other, stdout)
	}

	// From the home directory: nothing there becomes a project.
	stdout, stderr, code = run(home, "images", "prune", "--dry-run")
	if code != 0 || !strings.Contains(stderr, home+" is not a project") || strings.Contains(stdout, "would remove "+prefix+"server:") {
		t.Errorf("prune in HOME: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if out, errOut, code := run(home, "images", "pull", "--manifest", writeImageManifest(t, "")); code != 0 {
		t.Errorf("pull in HOME: exit %d\n%s\n%s", code, out, errOut)
	}
	if _, err := os.Lstat(filepath.Join(home, ".pml")); err == nil {
		t.Error("prune or pull in HOME created ~/.pml")
	}
	data, err := os.ReadFile(filepath.Join(state, "projects.json"))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Projects map[string]any `json:"projects"`
	}
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	if _, ok := got.Projects[home]; ok {
		t.Errorf("projects.json names HOME as a project:\n%s", data)
	}
}

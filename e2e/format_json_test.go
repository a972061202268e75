//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// Every command with a result prints it as one JSON document with
// --format json (issue 44), and on a stderr that is not a terminal pml
// speaks one format, JSON lines, saying each event once.

// jsonLines checks that every line of stderr is a JSON object and returns
// their messages.
func jsonLines(t *testing.T, what, stderr string) []string {
	t.Helper()
	var msgs []string
	if strings.TrimSpace(stderr) == "" {
		return nil
	}
	for _, l := range strings.Split(strings.TrimSpace(stderr), "\n") {
		var e struct {
			Message string `json:"message"`
		}
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Errorf("%s: a stderr line that is not JSON: %q", what, l)
			continue
		}
		msgs = append(msgs, e.Message)
	}
	return msgs
}

// onceEach fails for an event said twice. Repeated progress lines differ
// in their fields, not their message: "still installing" may repeat.
func onceEach(t *testing.T, what string, msgs []string) {
	t.Helper()
	seen := map[string]int{}
	for _, m := range msgs {
		seen[m]++
	}
	for m, n := range seen {
		if n > 1 && m != "still installing" {
			t.Errorf("%s: %q said %d times", what, m, n)
		}
	}
	for _, m := range msgs {
		// The old text twins of the broker's progress events.
		if strings.HasPrefix(m, "still installing ") || strings.HasPrefix(m, "installed everything in") {
			t.Errorf("%s: the install's progress said beside the broker's: %q", what, m)
		}
	}
}

func TestAddRemoveCleanupPrintJSONAndOneLogFormat(t *testing.T) {
	needImage(t, nodeImage)
	ws := newWorkspace(t, "")
	// The first add installs: its events on stderr, each once, all JSON.
	code, stdout, stderr := runPML(t, ws, "add", "npm:@modelcontextprotocol/server-everything", "--yes", "--allow")
	if code != 0 {
		t.Fatalf("pml add: exit %d\n%s\n%s", code, stdout, stderr)
	}
	msgs := jsonLines(t, "pml add", stderr)
	onceEach(t, "pml add", msgs)
	if !strings.Contains(strings.Join(msgs, "\n"), "installed and verified") || !strings.Contains(strings.Join(msgs, "\n"), "✓ everything added") {
		t.Errorf("pml add's events:\n%s", stderr)
	}
	// --log-format text: text for people, no JSON line.
	code, stdout, stderr = runPML(t, ws, "--log-format", "text", "remove", "everything")
	if code != 0 || strings.Contains(stderr, `{"level"`) || !strings.Contains(stderr, "removed mcps.everything") {
		t.Fatalf("pml remove --log-format text: exit %d\n%s\n%s", code, stdout, stderr)
	}

	code, stdout, stderr = runPML(t, ws, "add", "npm:@modelcontextprotocol/server-everything", "--yes", "--allow", "--format", "json")
	if code != 0 {
		t.Fatalf("pml add: exit %d\n%s\n%s", code, stdout, stderr)
	}
	var add struct {
		Name, Kind, File, Source string
		Allowed                  bool
		Tools                    []struct {
			Name        string          `json:"name"`
			WireName    string          `json:"wire_name"`
			InputSchema json.RawMessage `json:"input_schema"`
		}
	}
	if err := json.Unmarshal([]byte(stdout), &add); err != nil {
		t.Fatalf("pml add --format json: %v\n%s", err, stdout)
	}
	if add.Name != "everything" || add.Kind != "server" || add.File != ws.path(".pml.json") || !strings.HasPrefix(add.Source, "npm:@modelcontextprotocol/server-everything@") || !add.Allowed || len(add.Tools) < 5 {
		t.Errorf("pml add --format json: %+v", add)
	}
	if add.Tools[0].WireName == "" || len(add.Tools[0].InputSchema) == 0 || !strings.HasPrefix(add.Tools[0].Name, "everything:") {
		t.Errorf("a tool as pml tools lists it: %+v", add.Tools[0])
	}
	onceEach(t, "pml add --format json", jsonLines(t, "pml add --format json", stderr))

	code, stdout, stderr = runPML(t, ws, "remove", "everything", "--format", "json")
	if code != 0 {
		t.Fatalf("pml remove: exit %d\n%s\n%s", code, stdout, stderr)
	}
	var rm struct {
		Name, Kind, File string
		Deleted, Kept    []struct{ Server, Kind, Path string }
	}
	if err := json.Unmarshal([]byte(stdout), &rm); err != nil {
		t.Fatalf("pml remove --format json: %v\n%s", err, stdout)
	}
	if rm.Name != "everything" || rm.Kind != "server" || rm.File != ws.path(".pml.json") || rm.Deleted == nil || len(rm.Deleted) != 0 || len(rm.Kept) == 0 {
		t.Errorf("pml remove --format json: %+v\n%s", rm, stdout)
	}

	code, stdout, stderr = runPML(t, ws, "cleanup", "--dry-run", "--format", "json")
	var cl struct {
		DryRun      bool `json:"dry_run"`
		Deleted     []struct{ Server, Kind, Path string }
		Interrupted []string
	}
	if err := json.Unmarshal([]byte(stdout), &cl); code != 0 || err != nil || !cl.DryRun || len(cl.Deleted) == 0 || cl.Interrupted == nil {
		t.Fatalf("pml cleanup --dry-run --format json: exit %d, %v %+v\n%s\n%s", code, err, cl, stdout, stderr)
	}
	code, stdout, stderr = runPML(t, ws, "cleanup", "--format", "json")
	cl.Deleted = nil
	if err := json.Unmarshal([]byte(stdout), &cl); code != 0 || err != nil || cl.DryRun || len(cl.Deleted) == 0 || cl.Deleted[0].Server != "everything" {
		t.Fatalf("pml cleanup --format json: exit %d, %v %+v\n%s\n%s", code, err, cl, stdout, stderr)
	}
	onceEach(t, "pml cleanup", jsonLines(t, "pml cleanup", stderr))
}

func TestImagesSaveLoadPrunePrintJSON(t *testing.T) {
	cli := imagesEngine(t)
	prefix := "pml-e2e-" + imgNonce(t) + "/"
	ref := prefix + "json:v1"
	id := importTestImage(t, cli, ref, "", map[string]string{"pml.image": "test"})
	t.Cleanup(func() { removeTestImage(t, cli, id) })
	ws := newWorkspace(t, fmt.Sprintf(`{"mcps": {"j": {"image": %q, "command": "/x"}}}`, ref))
	man := writeImageManifest(t, "")

	bundle := filepath.Join(t.TempDir(), "b.tar.zst")
	stdout, stderr, code := runImagesCmd(t, ws, "images", "save", "--manifest", man, "--images-only", "-o", bundle, "--format", "json")
	var save struct {
		File         string `json:"file"`
		Size         int64  `json:"size"`
		RawSize      int64  `json:"raw_size"`
		Images       []struct{ Ref, ID string }
		ProjectFiles []string `json:"project_files"`
	}
	if err := json.Unmarshal([]byte(stdout), &save); code != 0 || err != nil {
		t.Fatalf("save: exit %d, %v\n%s\n%s", code, err, stdout, stderr)
	}
	saveStderr := stderr
	saved := false
	for _, im := range save.Images {
		saved = saved || (im.Ref == ref && im.ID == id)
	}
	if save.File != bundle || save.Size <= 0 || save.RawSize < save.Size || !saved || save.ProjectFiles == nil {
		t.Errorf("save --format json: %+v\n%s", save, stdout)
	}

	removeTestImage(t, cli, id)
	stdout, stderr, code = runImagesCmd(t, ws, "images", "load", "-i", bundle, "--images-only", "--format", "json")
	var load struct {
		OK     bool `json:"ok"`
		Images []struct {
			Ref, ID string
			Names   []string
			New     bool
		}
		Restored []string `json:"restored"`
		LeftOut  []string `json:"left_out"`
		Error    string   `json:"error"`
	}
	if err := json.Unmarshal([]byte(stdout), &load); code != 0 || err != nil {
		t.Fatalf("load: exit %d, %v\n%s\n%s", code, err, stdout, stderr)
	}
	onceEach(t, "pml images save", jsonLines(t, "pml images save", saveStderr))
	onceEach(t, "pml images load", jsonLines(t, "pml images load", stderr))
	loaded := false
	for _, im := range load.Images {
		loaded = loaded || (im.Ref == ref && im.ID == id && im.New && len(im.Names) > 0)
	}
	if !load.OK || !loaded || load.Restored == nil || load.LeftOut == nil || load.Error != "" {
		t.Errorf("load --format json: %+v\n%s", load, stdout)
	}

	stdout, stderr, code = runImagesCmd(t, ws, "images", "prune", "--manifest", man, "--repo", prefix, "--dry-run", "--format", "json")
	var prune struct {
		OK          bool `json:"ok"`
		DryRun      bool `json:"dry_run"`
		Removed     []struct{ ID string }
		WouldRemove []struct {
			Names []string
			ID    string
		} `json:"would_remove"`
		Kept   []struct{ ID string }
		Failed []string
	}
	if err := json.Unmarshal([]byte(stdout), &prune); code != 0 || err != nil {
		t.Fatalf("prune: exit %d, %v\n%s\n%s", code, err, stdout, stderr)
	}
	onceEach(t, "pml images prune", jsonLines(t, "pml images prune", stderr))
	// The project uses the image: it is not among what would go.
	if !prune.OK || !prune.DryRun || prune.Removed == nil || prune.Kept == nil || prune.Failed == nil || len(prune.WouldRemove) != 0 {
		t.Errorf("prune --format json: %+v\n%s", prune, stdout)
	}
	// Once no project uses it, the image pml loaded would go.
	ws.write(".pml.json", `{}`)
	stdout, _, _ = runImagesCmd(t, ws, "images", "prune", "--manifest", man, "--repo", prefix, "--dry-run", "--format", "json")
	prune.WouldRemove = nil
	if err := json.Unmarshal([]byte(stdout), &prune); err != nil || len(prune.WouldRemove) != 1 || prune.WouldRemove[0].ID != id {
		t.Errorf("prune --format json once unused: %v %+v\n%s", err, prune, stdout)
	}
}

// TestEveryCommandSpeaksOneFormatOnStderr: with stderr not a terminal,
// what init says, doctor's failure, a pull's progress and main's last
// line for a failed command are JSON events, each said once; with
// --log-format text they are text, with no JSON line (issue 44).
func TestEveryCommandSpeaksOneFormatOnStderr(t *testing.T) {
	ws := newWorkspace(t, "")
	code, stdout, stderr := runPML(t, ws, "init", "--yes", "--local")
	if code != 0 {
		t.Fatalf("pml init: exit %d\n%s\n%s", code, stdout, stderr)
	}
	msgs := jsonLines(t, "pml init", stderr)
	onceEach(t, "pml init", msgs)
	if all := strings.Join(msgs, "\n"); !strings.Contains(all, "Next:") || !strings.Contains(all, "local mode") {
		t.Errorf("pml init's events:\n%s", stderr)
	}

	// A failed command: its error is the last event, with its exit code.
	code, stdout, stderr = runPML(t, ws, "-H", "unix:///nonexistent.sock", "doctor")
	msgs = jsonLines(t, "pml doctor", stderr)
	onceEach(t, "pml doctor", msgs)
	if msg, c, ok := errorEvent(stderr); code != 1 || !ok || c != 1 || !strings.Contains(msg, "check(s) failed") || !strings.Contains(stdout, "FAIL") {
		t.Errorf("pml doctor with no engine: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	code, _, stderr = runPML(t, ws, "images", "pull", "--parallel", "0")
	jsonLines(t, "a usage error", stderr)
	if msg, c, ok := errorEvent(stderr); code != 2 || !ok || c != 2 || !strings.Contains(msg, "--parallel must be at least 1") || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
		t.Errorf("a usage error: exit %d\n%s", code, stderr)
	}
	// --log-format text: the same error as the text line people read.
	code, _, stderr = runPML(t, ws, "--log-format", "text", "images", "pull", "--parallel", "0")
	if code != 2 || !strings.HasPrefix(stderr, "pml: --parallel must be at least 1") || strings.Contains(stderr, `{"level"`) {
		t.Errorf("--log-format text: exit %d\n%s", code, stderr)
	}

	// A pull's progress: one event per line, each once.
	cli := imagesEngine(t)
	ref := "pml-e2e-" + imgNonce(t) + "/once:v1"
	id := importTestImage(t, cli, ref, "", nil)
	t.Cleanup(func() { removeTestImage(t, cli, id) })
	pws := newWorkspace(t, fmt.Sprintf(`{"mcps": {"once": {"image": %q, "command": "/x"}}}`, ref))
	out, stderr, code := runImagesCmd(t, pws, "images", "pull", "--manifest", writeImageManifest(t, ""))
	msgs = jsonLines(t, "pml images pull", stderr)
	onceEach(t, "pml images pull", msgs)
	if code != 0 || len(msgs) == 0 {
		t.Errorf("pml images pull: exit %d\n%s\n%s", code, out, stderr)
	}
}

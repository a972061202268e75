package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/internal/toolbox"
)

// anImage is the toolbox image, there (ref) or not (err).
type anImage struct {
	ref string
	err error
}

func (i anImage) Ensure(context.Context) (string, error) { return i.ref, i.err }

var readTool = toolbox.Tool{Name: "filesystem:read_file", PathArgs: []string{"path"}}

// echoAgent plays the toolbox agent: it answers with the request it got.
func echoAgent(line string) string {
	var req toolbox.Request
	if err := json.Unmarshal([]byte(line), &req); err != nil {
		return `{"text": "bad request", "isError": true}`
	}
	out, _ := json.Marshal(toolbox.Response{Text: req.Tool + " " + string(req.Args), Structured: json.RawMessage(`{"ws": "` + req.Workspace + `"}`)})
	return string(out)
}

func TestAToolboxCallGoesToTheAgentWithItsPathsResolved(t *testing.T) {
	sb, rt := newTestSandbox(t, readLine(echoAgent), 5*time.Second)
	res := NewToolboxExec(sb, anImage{ref: "pml-toolbox:test"}).Run(context.Background(), nil, readTool, map[string]any{"path": "a.txt"})
	if res.IsError {
		t.Fatalf("error: %s", res.Text)
	}
	want, _ := json.Marshal(map[string]any{"path": filepath.Join(sb.Workspace, "a.txt")})
	if res.Text != "filesystem:read_file "+string(want) {
		t.Errorf("text %q", res.Text)
	}
	if s, _ := res.Structured.(json.RawMessage); !strings.Contains(string(s), sb.Workspace) {
		t.Errorf("structured %s", s)
	}
	spec := rt.Last().Spec
	if spec.Image != "pml-toolbox:test" || !spec.Mounts[0].ReadOnly {
		t.Errorf("a tool that only reads: spec %+v", spec)
	}
}

func TestAToolThatWritesGetsTheWorkspaceWritable(t *testing.T) {
	sb, rt := newTestSandbox(t, readLine(echoAgent), 5*time.Second)
	write := toolbox.Tool{Name: "filesystem:write_file", PathArgs: []string{"path"}, Writes: true}
	res := NewToolboxExec(sb, anImage{ref: "t"}).Run(context.Background(), nil, write, map[string]any{"path": "b.txt", "content": "x"})
	if res.IsError {
		t.Fatalf("error: %s", res.Text)
	}
	if m := rt.Last().Spec.Mounts[0]; m.ReadOnly || m.Source != sb.Workspace {
		t.Errorf("workspace mount %+v", m)
	}
}

func TestAPathOutsideTheWorkspaceIsBlockedBeforeAnyContainer(t *testing.T) {
	sb, rt := newTestSandbox(t, readLine(echoAgent), 5*time.Second)
	ex := NewToolboxExec(sb, anImage{ref: "t"})
	for _, args := range []map[string]any{
		{"path": "/etc/passwd"},
		{"path": "../outside"},
	} {
		res := ex.Run(context.Background(), nil, readTool, args)
		if !res.IsError || !res.Blocked || !errors.Is(res.Err(), call.ErrInvalidInput) {
			t.Errorf("%v: %+v", args, res)
		}
	}
	multi := toolbox.Tool{Name: "filesystem:read_multiple_files", PathArgs: []string{"paths"}}
	if res := ex.Run(context.Background(), nil, multi, map[string]any{"paths": []any{"a", 3.0}}); !strings.Contains(res.Text, "must be a list of paths") {
		t.Errorf("a list with a number: %q", res.Text)
	}
	if res := ex.Run(context.Background(), nil, readTool, map[string]any{"path": 3.0}); !strings.Contains(res.Text, "must be a path (a string)") {
		t.Errorf("a number: %q", res.Text)
	}
	if n := len(rt.Procs()); n != 0 {
		t.Errorf("%d containers started", n)
	}
}

func TestResolvePathsMakesEveryPathAbsolute(t *testing.T) {
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(ws, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	multi := toolbox.Tool{Name: "filesystem:read_multiple_files", PathArgs: []string{"paths", "missing"}}
	args := map[string]any{"paths": []any{"d", "d/x"}}
	if err := resolvePaths(ws, nil, multi, args); err != nil {
		t.Fatal(err)
	}
	got := args["paths"].([]any)
	if got[0] != filepath.Join(ws, "d") || got[1] != filepath.Join(ws, "d", "x") {
		t.Errorf("paths %v", got)
	}
	if _, ok := args["missing"]; ok {
		t.Error("a missing argument was added")
	}
}

func TestAToolboxImageThatCannotBeHadIsUnavailable(t *testing.T) {
	sb, rt := newTestSandbox(t, readLine(echoAgent), 5*time.Second)
	res := NewToolboxExec(sb, anImage{err: errors.New("no engine")}).Run(context.Background(), nil, readTool, map[string]any{"path": "a"})
	if !errors.Is(res.Err(), call.ErrUnavailable) || !strings.Contains(res.Text, "no engine") {
		t.Errorf("result %+v", res)
	}
	if n := len(rt.Procs()); n != 0 {
		t.Errorf("%d containers started", n)
	}
}

func TestAnAgentAnswerThatIsNoJSONSaysSo(t *testing.T) {
	sb, _ := newTestSandbox(t, readLine(func(string) string { return "garbage" }), 5*time.Second)
	res := NewToolboxExec(sb, anImage{ref: "t"}).Run(context.Background(), nil, readTool, map[string]any{"path": "a"})
	if !res.IsError || !strings.Contains(res.Text, "the toolbox agent gave no valid answer (its answer is not JSON)") {
		t.Errorf("text %q", res.Text)
	}
}

func TestStderrTailKeepsTheEnd(t *testing.T) {
	if got := stderrTail([]byte("  \n")); got != "" {
		t.Errorf("blank: %q", got)
	}
	long := strings.Repeat("a", 3000) + "END"
	if got := stderrTail([]byte(long)); !strings.HasPrefix(got, ": …") || !strings.HasSuffix(got, "END") || len([]rune(got)) != 2003 {
		t.Errorf("long: %d runes", len([]rune(got)))
	}
}

//go:build linux

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Calls that come together on a full disk (issue 51): every call that
// runs has its audit entry, or it does not run and the client is told the
// disk is full. Before, every call checked the same reserve and nothing
// counted the calls in flight: a burst of 400 over pml stdio ran 17 to 43
// calls with no entry (the fast path had answered already, so the client
// heard nothing), over pml serve 17. The workspace's .pml/ is a small
// tmpfs of the test's own, filled to its last byte after a first call
// made the log; the bursts mix calls to a pooled server (the stdio fast
// path) and toolbox calls.

// burstCalls is how many calls each burst sends at once.
const burstCalls = 400

// fullDotPMLWorkspace mounts a small tmpfs on the workspace's .pml/ and writes the
// configuration (trusted, as the person would) after it, so everything pml
// keeps there is on the small disk.
func fullDotPMLWorkspace(t *testing.T) *workspace {
	t.Helper()
	ws := newWorkspace(t, "")
	dot := ws.path(".pml")
	if err := os.Mkdir(dot, 0o700); err != nil {
		t.Fatal(err)
	}
	mountSmall(t, dot, "2m")
	// Toolbox calls queue for containers (sandbox.max_containers): the
	// time of a call covers that wait for the ones an old pml ran.
	cfg := probeConfig(t, "")
	ws.write(".pml.json", cfg[:len(cfg)-1]+`, "sandbox": {"timeout": "3m"}}`)
	ws.write("small.txt", "small")
	return ws
}

// burstOutcome counts how the calls of a burst ended.
type burstOutcome struct {
	ok, refused int
	// toolboxOK counts the toolbox calls among ok.
	toolboxOK int
	// unaudited are results that say the call ran without its entry;
	// other are results that are neither a success nor a refusal.
	unaudited, other []string
}

// burst sends burstCalls calls at once through call (one in four to the
// toolbox, each in a container of its own; the others to the pooled
// server) and sorts their results.
func burst(t *testing.T, logPath string, call func(ctx context.Context, name string, args map[string]any) (*mcp.CallToolResult, error)) burstOutcome {
	t.Helper()
	var (
		mu    sync.Mutex
		out   burstOutcome
		wg    sync.WaitGroup
		start = make(chan struct{})
	)
	for i := 0; i < burstCalls; i++ {
		name, args, want := "probe:echo", map[string]any{"text": fmt.Sprint("e", i)}, fmt.Sprint("e", i)
		if i%4 == 1 {
			name, args, want = "filesystem:read_file", map[string]any{"path": "small.txt"}, "small"
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			res, err := call(ctx, name, args)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				out.other = append(out.other, name+": protocol error: "+err.Error())
				return
			}
			txt := text(res)
			switch {
			case strings.Contains(txt, "audit entry could not be written"):
				out.unaudited = append(out.unaudited, name+": "+txt)
			case !res.IsError && txt == want:
				out.ok++
				if name == "filesystem:read_file" {
					out.toolboxOK++
				}
			case res.IsError && strings.Contains(txt, "did not run "+name) && strings.Contains(txt, logPath) &&
				strings.Contains(txt, "no space left on device") && strings.Contains(txt, "free space"):
				out.refused++
			default:
				out.other = append(out.other, fmt.Sprintf("%s: error %v: %s", name, res.IsError, txt))
			}
		}()
	}
	close(start)
	wg.Wait()
	return out
}

// checkBurst fills .pml/ to its last byte, sends the burst, and checks
// that the entries written during it are exactly the calls that answered
// as a success, every other call refused as the disk being full.
func checkBurst(t *testing.T, ws *workspace, call func(ctx context.Context, name string, args map[string]any) (*mcp.CallToolResult, error)) {
	t.Helper()
	logPath := ws.path(".pml/audit.jsonl")
	// A first call of each kind makes the log, starts the pooled server
	// and the toolbox, and reserves the room a call reserves.
	for _, c := range []struct {
		name string
		args map[string]any
	}{{"probe:echo", map[string]any{"text": "warm"}}, {"filesystem:read_file", map[string]any{"path": "small.txt"}}} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		res, err := call(ctx, c.name, c.args)
		cancel()
		if err != nil || res.IsError {
			t.Fatalf("%s before the disk is full: %v %s", c.name, err, text(res))
		}
	}
	// More calls, one at a time, until what the log reserved past its end
	// is half used, as on a disk that has served for a while: the room
	// left is then less than the entries of a whole burst.
	warm := 2
	for ; warm < 400 && reservedLeft(t, logPath) > 40<<10; warm++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		res, err := call(ctx, "probe:echo", map[string]any{"text": "warm"})
		cancel()
		if err != nil || res.IsError {
			t.Fatalf("a call before the disk is full: %v %s", err, text(res))
		}
	}
	// A fast-path call's entry is written just after its answer: all of
	// them are in before the disk fills.
	before := len(validJSONL(t, logPath))
	for deadline := time.Now().Add(10 * time.Second); before != warm && time.Now().Before(deadline); before = len(validJSONL(t, logPath)) {
		time.Sleep(20 * time.Millisecond)
	}
	if before != warm {
		t.Fatalf("%d calls before the disk is full, %d entries", warm, before)
	}
	fillDisk(t, filepath.Join(ws.path(".pml"), "filler"))

	var st syscall.Statfs_t
	if err := syscall.Statfs(ws.path(".pml"), &st); err != nil || st.Bfree != 0 {
		t.Fatalf(".pml/ is not full: %d blocks free, %v", st.Bfree, err)
	}
	t.Logf("the disk is full; the log has %d bytes reserved past its end", reservedLeft(t, logPath))
	out := burst(t, logPath, call)
	// The entries of the last fast-path calls may follow their answers by
	// a moment.
	entries := len(validJSONL(t, logPath)) - before
	for deadline := time.Now().Add(10 * time.Second); entries < out.ok && time.Now().Before(deadline); entries = len(validJSONL(t, logPath)) - before {
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("a burst of %d calls on a full disk: %d ran (%d in the toolbox), %d refused, %d entries, %d ran unaudited, %d other", burstCalls, out.ok, out.toolboxOK, out.refused, entries, len(out.unaudited), len(out.other))
	if entries != out.ok {
		t.Errorf("%d calls answered as a success, %d audit entries written: %d ran without their entry", out.ok, entries, out.ok-entries)
	}
	if len(out.unaudited) > 0 {
		t.Errorf("%d calls ran and their entry could not be written, e.g. %s", len(out.unaudited), out.unaudited[0])
	}
	if len(out.other) > 0 {
		t.Errorf("%d calls neither ran nor were refused as the disk being full, e.g. %s", len(out.other), out.other[0])
	}
	if out.ok+out.refused != burstCalls || out.ok == 0 || out.refused == 0 {
		t.Errorf("of %d calls %d ran and %d were refused: want every call one or the other, some of each (the room the log had is for a few)", burstCalls, out.ok, out.refused)
	}
}

// reservedLeft is how much of the blocks of the file at p lie past its
// end (what the audit log reserved with fallocate).
func reservedLeft(t *testing.T, p string) int64 {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Blocks*512 - fi.Size()
}

// TestABurstOverStdioOnAFullDiskRunsOnlyAuditedCalls sends 400 calls at
// once over pml stdio (a go-sdk client): the pooled server's calls take
// the fast path, whose answer goes before the entry is written.
func TestABurstOverStdioOnAFullDiskRunsOnlyAuditedCalls(t *testing.T) {
	ws := fullDotPMLWorkspace(t)
	s := startSession(t, ws)
	checkBurst(t, ws, func(ctx context.Context, name string, args map[string]any) (*mcp.CallToolResult, error) {
		return s.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	})
	if t.Failed() {
		t.Logf("pml's stderr ends:\n%s", tail(s.stderr.String()))
	}
}

// TestABurstOverServeOnAFullDiskRunsOnlyAuditedCalls sends 400 calls at
// once over pml serve (Streamable HTTP on loopback).
func TestABurstOverServeOnAFullDiskRunsOnlyAuditedCalls(t *testing.T) {
	ws := fullDotPMLWorkspace(t)
	url, token := startServe(t, ws)
	cs := httpSession(t, url, token)
	checkBurst(t, ws, func(ctx context.Context, name string, args map[string]any) (*mcp.CallToolResult, error) {
		return cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	})
}

package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/images"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/extramount"
	"github.com/pml-dev/pml/internal/pathguard"
	"github.com/pml-dev/pml/internal/toolbox"
)

// ToolboxExec runs the filesystem tools (toolbox.Filesystem): each call
// in a single-use container of the toolbox image, whose agent gets one
// request.
type ToolboxExec struct {
	sb    *Sandbox
	image Image
}

// Image makes sure an image is on the host and gives its reference
// (images.Toolbox, built from pml's in-container program).
type Image interface {
	Ensure(ctx context.Context) (string, error)
}

// NewToolboxExec is the filesystem tools' executor on sb, in image.
func NewToolboxExec(sb *Sandbox, image Image) ToolboxExec {
	return ToolboxExec{sb: sb, image: image}
}

// Run executes a filesystem tool in a fresh toolbox container: the
// paths are validated here first, then the workspace is mounted (read-only
// unless the tool writes) and the in-container agent gets one request.
// The container comes pre-started from the pool when one is ready: every
// filesystem tool with the same mount mode shares one kind, since the
// request, not the container, names the tool.
func (e ToolboxExec) Run(ctx context.Context, _ *call.Call, def toolbox.Tool, args map[string]any) call.Result {
	// The extra mounts (sandbox.mounts), read-only unless the tool writes
	// and the mount allows it.
	extra, err := e.sb.Extra.Tool(!def.Writes)
	if err != nil {
		return call.ResultFor(fmt.Errorf("%w: %s: %w; nothing ran", call.ErrUnavailable, def.Name, err))
	}
	if err := resolvePaths(e.sb.Workspace, extramount.Guard(extra), def, args); err != nil {
		r := call.ResultFor(err)
		r.Blocked = true
		return r
	}
	// The image check counts against the call's limit: an engine that
	// does not answer it must not hold the call longer.
	limit := e.sb.policyLimit()
	pctx, cancel := limit.within(ctx)
	defer cancel()
	ref, err := e.image.Ensure(pctx)
	if err != nil {
		return beforeContainer(ctx, pctx, limit, fmt.Errorf("%w: %w", call.ErrUnavailable, err))
	}
	argJSON, _ := json.Marshal(args)
	deadline := time.Duration(e.sb.Policy().Timeout)
	if deadline <= 0 {
		deadline = defaultCallTimeout // what run applies
	}
	deadline += deadlineMargin
	req, _ := json.Marshal(toolbox.Request{Tool: def.Name, Args: argJSON, Workspace: e.sb.Workspace, Mounts: extramount.Inside(extra), DeadlineMS: deadline.Milliseconds()})
	req = append(req, '\n')

	spec := container.Spec{
		Image:      ref,
		Entrypoint: images.AgentEntrypoint,
		Env:        []string{"PML_WORKSPACE=" + e.sb.Workspace},
		WorkingDir: e.sb.Workspace,
		User:       e.sb.User,
		Mounts:     append(e.sb.WorkspaceMounts(!def.Writes), extra...),
		Policy:     e.sb.Policy(),
		Labels:     e.sb.Labels("pool:toolbox"),
	}
	// JSON escaping can make an answer larger than the content it carries.
	// The agent answers with one line: the call ends with it.
	res, failure := e.sb.run(ctx, spec, container.Request{Stdin: req, Limit: 4 * e.sb.Policy().OutputLimit, AnswerLine: true}, limit)
	if failure != nil {
		return *failure
	}
	if res.Truncated {
		return call.ResultFor(fmt.Errorf("%s: the answer is larger than the output limit (%d bytes); read less at a time (head/tail)", def.Name, 4*e.sb.Policy().OutputLimit))
	}
	var resp toolbox.Response
	if err := json.Unmarshal(bytes.TrimSpace(res.Stdout), &resp); err != nil {
		how := fmt.Sprintf("exit code %d", res.Exit.Code)
		if res.Answered {
			how = "its answer is not JSON"
		}
		return call.ResultFor(fmt.Errorf("%s: the toolbox agent gave no valid answer (%s)%s", def.Name, how, stderrTail(res.Stderr)))
	}
	out := call.Result{Text: resp.Text, IsError: resp.IsError}
	if len(resp.Structured) > 0 {
		out.Structured = json.RawMessage(resp.Structured)
	}
	return out
}

// resolvePaths validates every path argument of def in place, replacing
// it with its resolved absolute form: in the workspace, or in one of the
// extra mounts (mounts; a tool that writes is refused a read-only one).
func resolvePaths(ws string, mounts []pathguard.Mount, def toolbox.Tool, args map[string]any) error {
	for _, name := range def.PathArgs {
		v, ok := args[name]
		if !ok {
			continue // the agent reports missing required arguments
		}
		switch t := v.(type) {
		case string:
			p, err := pathguard.ResolveIn(ws, mounts, t, def.Writes)
			if err != nil {
				return pathError(def.Name, name, err)
			}
			args[name] = p
		case []any:
			out := make([]any, len(t))
			for i, e := range t {
				s, ok := e.(string)
				if !ok {
					return fmt.Errorf("%w: %s: argument %q must be a list of paths (strings)", call.ErrInvalidInput, def.Name, name)
				}
				p, err := pathguard.ResolveIn(ws, mounts, s, def.Writes)
				if err != nil {
					return pathError(def.Name, fmt.Sprintf("%s[%d]", name, i), err)
				}
				out[i] = p
			}
			args[name] = out
		default:
			return fmt.Errorf("%w: %s: argument %q must be a path (a string)", call.ErrInvalidInput, def.Name, name)
		}
	}
	return nil
}

func pathError(tool, arg string, err error) error {
	return fmt.Errorf("%w: %s refused argument %q: %v", call.ErrInvalidInput, tool, arg, err)
}

func stderrTail(stderr []byte) string {
	s := strings.TrimSpace(string(stderr))
	if s == "" {
		return ""
	}
	if len(s) > 2000 {
		s = "…" + s[len(s)-2000:]
	}
	return ": " + s
}

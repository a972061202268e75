package broker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/pml-dev/pml/images"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/pathguard"
	"github.com/pml-dev/pml/internal/toolbox"
)

// runToolbox executes a filesystem tool in a fresh toolbox container: the
// paths are validated here first, then the workspace is mounted (read-only
// unless the tool writes) and the in-container agent gets one request.
// The container comes pre-started from the pool when one is ready: every
// filesystem tool with the same mount mode shares one kind, since the
// request, not the container, names the tool.
func (b *Broker) runToolbox(ctx context.Context, def toolbox.Tool, args map[string]any) Result {
	if err := b.resolvePaths(def, args); err != nil {
		r := errorResult(err)
		r.blocked = true
		return r
	}
	ref, err := b.toolbox.Ensure(ctx)
	if err != nil {
		return errorResult(fmt.Errorf("%w: %w", ErrUnavailable, err))
	}
	argJSON, _ := json.Marshal(args)
	deadline := time.Duration(b.policy.Timeout)
	if deadline <= 0 {
		deadline = defaultCallTimeout // what run applies
	}
	deadline += deadlineMargin
	req, _ := json.Marshal(toolbox.Request{Tool: def.Name, Args: argJSON, Workspace: b.ws, DeadlineMS: deadline.Milliseconds()})
	req = append(req, '\n')

	spec := container.Spec{
		Image:      ref,
		Entrypoint: []string{images.AgentPath, "toolbox-agent"},
		Env:        []string{"PML_WORKSPACE=" + b.ws},
		WorkingDir: b.ws,
		User:       b.user,
		Mounts:     b.workspaceMounts(!def.Writes),
		Policy:     b.policy,
		Labels:     b.labels("pool:toolbox"),
	}
	// JSON escaping can make an answer larger than the content it carries.
	// The agent answers with one line: the call ends with it.
	res, failure := b.run(ctx, spec, container.Request{Stdin: req, Limit: 4 * b.policy.OutputLimit, AnswerLine: true}, time.Duration(b.policy.Timeout))
	if failure != nil {
		return *failure
	}
	if res.Truncated {
		return errorResult(fmt.Errorf("%s: the answer is larger than the output limit (%d bytes); read less at a time (head/tail)", def.Name, 4*b.policy.OutputLimit))
	}
	var resp toolbox.Response
	if err := json.Unmarshal(bytes.TrimSpace(res.Stdout), &resp); err != nil {
		how := fmt.Sprintf("exit code %d", res.Exit.Code)
		if res.Answered {
			how = "its answer is not JSON"
		}
		return errorResult(fmt.Errorf("%s: the toolbox agent gave no valid answer (%s)%s", def.Name, how, stderrTail(res.Stderr)))
	}
	out := Result{Text: resp.Text, IsError: resp.IsError}
	if len(resp.Structured) > 0 {
		out.Structured = json.RawMessage(resp.Structured)
	}
	return out
}

// resolvePaths validates every path argument of def in place, replacing
// it with its resolved absolute form.
func (b *Broker) resolvePaths(def toolbox.Tool, args map[string]any) error {
	for _, name := range def.PathArgs {
		v, ok := args[name]
		if !ok {
			continue // the agent reports missing required arguments
		}
		switch t := v.(type) {
		case string:
			p, err := pathguard.Resolve(b.ws, t)
			if err != nil {
				return pathError(def.Name, name, err)
			}
			args[name] = p
		case []any:
			out := make([]any, len(t))
			for i, e := range t {
				s, ok := e.(string)
				if !ok {
					return fmt.Errorf("%w: %s: argument %q must be a list of paths (strings)", ErrInvalidInput, def.Name, name)
				}
				p, err := pathguard.Resolve(b.ws, s)
				if err != nil {
					return pathError(def.Name, fmt.Sprintf("%s[%d]", name, i), err)
				}
				out[i] = p
			}
			args[name] = out
		default:
			return fmt.Errorf("%w: %s: argument %q must be a path (a string)", ErrInvalidInput, def.Name, name)
		}
	}
	return nil
}

func pathError(tool, arg string, err error) error {
	return fmt.Errorf("%w: %s refused argument %q: %v", ErrInvalidInput, tool, arg, err)
}

// defaultCallTimeout bounds a container call when no timeout is set.
const defaultCallTimeout = 60 * time.Second

// run executes spec in a single-use container (pre-started from the pool
// when one is ready) with a deadline and turns runtime failures, timeouts,
// cancellations and OOM kills into error results. On success it returns the
// raw container result and a nil failure.
func (b *Broker) run(ctx context.Context, spec container.Spec, req container.Request, timeout time.Duration) (container.Result, *Result) {
	if timeout <= 0 {
		timeout = defaultCallTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	names, err := b.exposed(spec.Mounts)
	if err != nil {
		r := errorResult(fmt.Errorf("%w: %w", ErrUnavailable, err))
		return container.Result{}, &r
	}
	if len(names) > 0 {
		// Watched from before the container takes the call (a
		// pre-started one runs only pml's own code until then) until it
		// is removed.
		release, err := b.guard.Expose(names, spec.Labels[container.LabelPurpose])
		if err != nil {
			r := errorResult(fmt.Errorf("%w: %w", ErrUnavailable, err))
			return container.Result{}, &r
		}
		req.Disposed = release
	}
	res, err := b.pool.Run(ctx, spec, req)
	b.log.Debug().Str("image", spec.Image).Bool("warm", res.Warm).Dur("took", res.Duration).Msg("container call")
	fail := func(e error) (container.Result, *Result) {
		r := errorResult(e)
		return res, &r
	}
	switch {
	case err != nil && errors.Is(err, container.ErrAtCap):
		return fail(fmt.Errorf("timed out after %s waiting for a container: %w", timeout, err))
	case err != nil && errors.Is(err, container.ErrImageMissing):
		return fail(fmt.Errorf("%w: image %s is not on this host (the container engine has no such image): %w", ErrUnavailable, spec.Image, err))
	case err != nil && errors.Is(err, container.ErrUnavailable):
		return fail(fmt.Errorf("%w: %w", ErrUnavailable, err))
	case err != nil && !res.TimedOut && !res.Cancelled:
		return fail(fmt.Errorf("%w: running the container failed: %w", ErrUnavailable, err))
	case res.TimedOut:
		return fail(fmt.Errorf("timed out after %s: the container was killed (raise sandbox.timeout in .pml.json if the work needs longer)", timeout))
	case res.Cancelled:
		return fail(errors.New("cancelled: the container was killed"))
	case res.Exit.OOMKilled:
		return fail(fmt.Errorf("killed: out of memory (limit %s; raise sandbox.memory in .pml.json if needed)", b.policy.Resources.Memory))
	}
	return res, nil
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

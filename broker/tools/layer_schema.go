package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/internal/audit"
)

// SchemaLayer checks a call's arguments against the tool's input schema
// before anything runs: a misspelt or missing argument is the caller's
// mistake, and finding it should cost no approval and no container. The
// schema is the one the client was shown (tools/list): a built-in tool's,
// or a server's from its registered or cached tool list; a tool whose
// schema is not known without starting something is not checked here
// (its server checks its own arguments).
type SchemaLayer struct {
	Next    call.Handler
	Schemas Schemas
}

// Schemas give the input schema the client was shown for a tool, when it
// is known without starting anything (Servers.KnownSchema).
type Schemas interface {
	KnownSchema(tool string) (json.RawMessage, bool)
}

func (l SchemaLayer) Call(ctx context.Context, c *call.Call) call.Result {
	raw, ok := l.Schemas.KnownSchema(c.Tool)
	if !ok || c.Req.Kind != call.KindTool {
		// (A prompt's or resource's params are the server's to check.)
		return l.Next.Call(ctx, c)
	}
	args := c.Args
	if c.RawArgs {
		// The fast path keeps them raw for the server; the check reads a
		// decoded copy and leaves the call's as they are.
		args = map[string]any{}
		if err := json.Unmarshal(c.Req.Args, &args); err != nil {
			return l.Next.Call(ctx, c)
		}
	}
	if err := checkArgs(raw, args); err != nil {
		c.Note(audit.Entry{Tool: c.Tool, Decision: audit.Failed, Reason: "arguments do not match the input schema", ArgKeys: audit.Keys(args)})
		return call.ResultFor(fmt.Errorf("%w: %s: %v", call.ErrInvalidInput, c.Tool, err))
	}
	return l.Next.Call(ctx, c)
}

// resolvedSchemas caches resolved schemas by their text: resolving is
// the costly part and the same few schemas are checked on every call.
var resolvedSchemas sync.Map // string → *jsonschema.Resolved (nil: unusable)

// checkArgs validates args against the JSON Schema raw. A schema pml
// cannot read is not held against the call (the server decides). The
// error names the unknown and the missing keys first, since those are
// the usual mistakes, then what the validator said.
func checkArgs(raw json.RawMessage, args map[string]any) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	v, ok := resolvedSchemas.Load(string(raw))
	if !ok {
		var s jsonschema.Schema
		var rs *jsonschema.Resolved
		if err := json.Unmarshal(raw, &s); err == nil {
			rs, _ = s.Resolve(nil)
		}
		v, _ = resolvedSchemas.LoadOrStore(string(raw), rs)
	}
	rs, _ := v.(*jsonschema.Resolved)
	if rs == nil {
		return nil
	}
	if args == nil {
		args = map[string]any{}
	}
	err := rs.Validate(args)
	if err == nil {
		return nil
	}
	var parts []string
	s := rs.Schema()
	if len(s.Properties) > 0 {
		var unknown []string
		for k := range args {
			if _, ok := s.Properties[k]; !ok {
				unknown = append(unknown, fmt.Sprintf("%q", k))
			}
		}
		slices.Sort(unknown)
		if len(unknown) > 0 {
			parts = append(parts, "unknown argument "+strings.Join(unknown, ", ")+" (it takes "+quotedKeys(s.Properties)+")")
		}
	}
	var missing []string
	for _, k := range s.Required {
		if _, ok := args[k]; !ok {
			missing = append(missing, fmt.Sprintf("%q", k))
		}
	}
	if len(missing) > 0 {
		parts = append(parts, "missing required argument "+strings.Join(missing, ", "))
	}
	if len(parts) == 0 {
		parts = append(parts, validatorText(err))
	}
	return fmt.Errorf("the arguments do not match the tool's input schema: %s", strings.Join(parts, "; "))
}

func quotedKeys[V any](m map[string]V) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, fmt.Sprintf("%q", k))
	}
	slices.Sort(keys)
	return strings.Join(keys, ", ")
}

// validatorText is the validator's message about the deepest part it
// names ("validating root: validating /properties/cwd: type: 3 has type
// …"), said about the argument: `argument "cwd": 3 has type …`.
func validatorText(err error) string {
	msg := err.Error()
	i := strings.LastIndex(msg, "validating /properties/")
	if i < 0 {
		return strings.TrimPrefix(msg, "validating root: ")
	}
	rest := msg[i+len("validating /properties/"):]
	name, what, ok := strings.Cut(rest, ": ")
	if !ok {
		return msg
	}
	what = strings.TrimPrefix(what, "type: ")
	return fmt.Sprintf("argument %q: %s", name, what)
}

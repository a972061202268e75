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
		// The fast path keeps them raw for the server. A schema with a
		// shape checks them as they are (schema_raw.go); otherwise, or
		// when the shape cannot tell, the check reads a decoded copy and
		// leaves the call's as they are.
		if len(raw) == 0 || string(raw) == "null" {
			return l.Next.Call(ctx, c) // no schema: nothing to check
		}
		if cs := compiledSchema(raw); cs.shape != nil && cs.shape.validObject(c.Req.Args) {
			return l.Next.Call(ctx, c)
		}
		decoded, err := decodedArgs(c.Req.Args)
		if err != nil {
			return l.Next.Call(ctx, c)
		}
		args = decoded
	}
	if err := checkArgs(raw, args); err != nil {
		c.Note(audit.Entry{Tool: c.Tool, Decision: audit.Failed, Reason: "arguments do not match the input schema", ArgKeys: audit.Keys(args)})
		return call.ResultFor(fmt.Errorf("%w: %s: %v", call.ErrInvalidInput, c.Tool, err))
	}
	return l.Next.Call(ctx, c)
}

// decodedArgs decodes raw arguments for the validator. (A function of
// its own: the map's address goes to the decoder, which would otherwise
// put the layer's own variable on the heap on every call.)
func decodedArgs(raw json.RawMessage) (map[string]any, error) {
	args := map[string]any{}
	err := json.Unmarshal(raw, &args)
	return args, err
}

// resolvedSchemas caches the schemas by their text: resolving is the
// costly part and the same few schemas are checked on every call. Keyed
// by the text itself, an entry can never answer for another schema (a
// reload that changes a tool's schema looks up its new text).
var resolvedSchemas sync.Map // string → *schemaCheck

// schemaCheck is one schema text, resolved (nil: one pml cannot read),
// and its shape for arguments kept as bytes (nil: none).
type schemaCheck struct {
	rs    *jsonschema.Resolved
	shape *shape
}

// compiledSchema is the cached check of the schema text raw.
func compiledSchema(raw json.RawMessage) *schemaCheck {
	if v, ok := resolvedSchemas.Load(string(raw)); ok {
		return v.(*schemaCheck)
	}
	var s jsonschema.Schema
	cs := &schemaCheck{}
	if err := json.Unmarshal(raw, &s); err == nil {
		cs.rs, _ = s.Resolve(nil)
		cs.shape = shapeOf(cs.rs)
	}
	v, _ := resolvedSchemas.LoadOrStore(string(raw), cs)
	return v.(*schemaCheck)
}

// checkArgs validates args against the JSON Schema raw. A schema pml
// cannot read is not held against the call (the server decides). The
// error names the unknown and the missing keys first, since those are
// the usual mistakes, then what the validator said.
func checkArgs(raw json.RawMessage, args map[string]any) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	rs := compiledSchema(raw).rs
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

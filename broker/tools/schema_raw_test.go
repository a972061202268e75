package tools

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/pml-dev/pml/broker/call"
)

// decodedVerdict is what the schema layer decided before shapes: the
// arguments decoded (a decode that fails lets the call through), then
// the validator.
func decodedVerdict(schema, args string) error {
	m := map[string]any{}
	if err := json.Unmarshal([]byte(args), &m); err != nil {
		return nil
	}
	return checkArgs(json.RawMessage(schema), m)
}

// shapeVerdict: whether the schema has a shape, and whether it calls
// args valid.
func shapeVerdict(schema, args string) (hasShape, valid bool) {
	cs := compiledSchema(json.RawMessage(schema))
	if cs.shape == nil {
		return false, false
	}
	return true, cs.shape.validObject([]byte(args))
}

var shapeSchemas = []string{
	`{"type":"object"}`,
	`{}`,
	`true`,
	`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false}`,
	`{"type":"object","properties":{"path":{"type":"string","description":"where"},"head":{"type":"integer"}},"required":["path"]}`,
	`{"type":"object","properties":{"n":{"type":"number"},"b":{"type":"boolean"},"z":{"type":"null"},"o":{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]}}}`,
	`{"type":"object","properties":{"tags":{"type":"array","items":{"type":"string"}},"any":{}}}`,
	`{"type":"object","properties":{"v":{"type":["string","null"]}},"additionalProperties":{"type":"integer"}}`,
	`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"a":{"type":"string","format":"uri","title":"A","default":"x","examples":["y"]}}}`,
	`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"a":{"type":"array","items":{"type":"integer"}}}}`,
	`{"type":"object","required":["a","b","c","d","e","f","g","h","i","j"]}`,
	// No shape: the validator decides every call.
	`{"type":"object","properties":{"a":{"type":"string","enum":["x"]}}}`,
	`{"type":"object","properties":{"a":{"type":"string","minLength":2}}}`,
	`{"type":"object","properties":{"a":{"$ref":"#/$defs/a"}},"$defs":{"a":{"type":"string"}}}`,
	`{"$schema":"https://example.com/other","type":"object"}`,
	`{"type":"object","properties":{"a":{"type":"integer","minimum":0}}}`,
	`{"type":"object","patternProperties":{"^x":{"type":"string"}}}`,
	`{"type":"object","properties":{"a":{"anyOf":[{"type":"string"},{"type":"integer"}]}}}`,
	`{"type":"string"}`,
	`{"type":[]}`,
	`{"type":"object","additionalProperties":{"not":{},"type":"string"}}`,
}

var shapeArgs = []string{
	`{}`,
	`{"text":"x"}`,
	`{"text":3}`,
	`{"text":"x","other":1}`,
	`{"path":"p","head":3}`,
	`{"path":"p","head":3.5}`,
	`{"path":"p","head":3.0}`,
	`{"path":"p","head":1e400}`,
	`{"path":"p","head":-0}`,
	`{"paht":"p"}`,
	`{"n":1,"b":true,"z":null,"o":{"x":1}}`,
	`{"n":"1"}`,
	`{"o":{}}`,
	`{"o":{"x":1.5}}`,
	`{"tags":["a","b"],"any":[1,{"x":null}]}`,
	`{"tags":["a",2]}`,
	`{"tags":"a"}`,
	`{"tags":[]}`,
	`{"v":null,"w":2}`,
	`{"v":"s","w":"2"}`,
	`{"v":1}`,
	`{"a":"x"}`,
	`{"a":"xy"}`,
	`{"a":[1,2]}`,
	`{"a":-1}`,
	`{"a":2}`,
	`{"text":"x","text":3}`,
	`{"text":3,"text":"x"}`,
	`{"te\u0078t":"x"}`,
	`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10}`,
	`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9}`,
	` {"text" : "x" } `,
	`null`,
	`[]`,
}

// TestAShapeNeverPassesWhatTheValidatorRefuses: for every schema and
// arguments, a shape's "valid" is the validator's (a shape that cannot
// tell leaves the call to it).
func TestAShapeNeverPassesWhatTheValidatorRefuses(t *testing.T) {
	shaped := 0
	for _, s := range shapeSchemas {
		for _, a := range shapeArgs {
			has, valid := shapeVerdict(s, a)
			if has {
				shaped++
			}
			if valid {
				if err := decodedVerdict(s, a); err != nil {
					t.Errorf("schema %s, arguments %s: the shape passed what the validator refuses: %v", s, a, err)
				}
			}
		}
	}
	if shaped == 0 {
		t.Fatal("no schema had a shape")
	}
}

// TestShapesTellTheUsualCalls: the schemas servers list (names, types,
// required, additionalProperties) are shapes, and a call that matches
// is valid on its bytes; one that does not is left to the validator.
func TestShapesTellTheUsualCalls(t *testing.T) {
	for _, tc := range []struct {
		schema, args  string
		shaped, valid bool
	}{
		{`{"type":"object"}`, `{"text":"x"}`, true, true},
		{`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false}`, `{"text":"x"}`, true, true},
		{`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false}`, `{"text":"x","more":1}`, true, false},
		{`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false}`, `{}`, true, false},
		{`{"type":"object","properties":{"head":{"type":"integer"}}}`, `{"head":2.0}`, true, true},
		{`{"type":"object","properties":{"head":{"type":"integer"}}}`, `{"head":2.5}`, true, false},
		{`{"type":"object","properties":{"tags":{"type":"array","items":{"type":"string"}}}}`, `{"tags":["a"]}`, true, true},
		{`{"type":"object","properties":{"a":{"type":"string","enum":["x"]}}}`, `{"a":"x"}`, false, false},
	} {
		has, valid := shapeVerdict(tc.schema, tc.args)
		if has != tc.shaped || valid != tc.valid {
			t.Errorf("schema %s, arguments %s: shape %v valid %v, want %v %v", tc.schema, tc.args, has, valid, tc.shaped, tc.valid)
		}
	}
}

// FuzzShapeAgreesWithTheValidator: whatever the schema and arguments,
// a shape never calls valid what the validator refuses.
func FuzzShapeAgreesWithTheValidator(f *testing.F) {
	for i, s := range shapeSchemas {
		f.Add(s, shapeArgs[i%len(shapeArgs)])
	}
	f.Fuzz(func(t *testing.T, schema, args string) {
		if !json.Valid([]byte(schema)) || !json.Valid([]byte(args)) {
			return
		}
		if _, valid := shapeVerdict(schema, args); valid {
			if err := decodedVerdict(schema, args); err != nil {
				t.Errorf("schema %s, arguments %s: the shape passed what the validator refuses: %v", schema, args, err)
			}
		}
	})
}

// knownSchema gives one schema for every tool (the layer's Schemas).
type knownSchema json.RawMessage

func (s knownSchema) KnownSchema(string) (json.RawMessage, bool) { return json.RawMessage(s), true }

// TestTheSchemaLayerDecidesRawArgumentsAsDecodedOnes: a fast-path call
// (arguments kept as bytes) is let through or refused, with the same
// words, as the same call with its arguments decoded.
func TestTheSchemaLayerDecidesRawArgumentsAsDecodedOnes(t *testing.T) {
	schema := knownSchema(`{"type":"object","properties":{"text":{"type":"string"},"n":{"type":"integer"}},"required":["text"],"additionalProperties":false}`)
	for _, args := range []string{`{"text":"x"}`, `{"text":"x","n":2}`, `{"text":3}`, `{"txt":"x"}`, `{"text":"x","n":1.5}`, `{"text":"x","more":true}`} {
		verdict := func(raw bool) (ran bool, text string) {
			c := call.NewCall(call.Request{Tool: "srv:t", Args: json.RawMessage(args)})
			if raw {
				c.Args, c.RawArgs = map[string]any{}, true
			} else {
				_ = json.Unmarshal([]byte(args), &c.Args)
			}
			next := call.HandlerFunc(func(context.Context, *call.Call) call.Result { ran = true; return call.Result{} })
			res := SchemaLayer{Next: next, Schemas: schema}.Call(context.Background(), c)
			return ran, res.Text
		}
		rawRan, rawText := verdict(true)
		ran, text := verdict(false)
		if rawRan != ran || rawText != text {
			t.Errorf("arguments %s: kept raw ran %v (%q), decoded ran %v (%q)", args, rawRan, rawText, ran, text)
		}
	}
}

package tools

import (
	"bytes"
	"math"
	"reflect"
	"strconv"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/pml-dev/pml/internal/jsonrpc"
)

// The fast path keeps a call's arguments as bytes, and the schema layer
// decoded a copy of them on every call only to validate it (a dozen
// allocations and a reflective walk, for a schema that usually says
// little more than the names and the types of the arguments). A schema
// made only of the keywords below is checked on the bytes themselves: a
// shape, compiled once per schema text. It answers only "valid": for
// anything else (a value of the wrong type, a missing name, a number it
// cannot read, an escaped name) the layer decodes the arguments and asks
// the validator as before, which decides and words the refusal. So the
// shape must never call valid what the validator refuses; it may call
// invalid what the validator takes (that costs only the decode).
//
// The keywords a shape covers, at every level: type (one or several),
// properties, required, additionalProperties (true, false or a shape),
// items (one schema for every item), and the keywords the validator does
// not check (annotations: title, description, default, examples, format,
// $comment, …). A schema with any other keyword ($ref, enum, const, the
// bounds, pattern, allOf, …) has no shape, and every call is validated as
// before.

// shape is a schema the arguments can be checked against as bytes.
type shape struct {
	// types is the set of JSON types allowed (typeBits); 0: any.
	types uint8
	// props are the shapes of the named members of an object; required
	// are the names an object must have.
	props    map[string]*shape
	required []string
	// closed: no member beyond props (additionalProperties false);
	// additional, when not nil, is the shape of every such member.
	closed     bool
	additional *shape
	// items, when not nil, is the shape of every item of an array.
	items *shape
}

const (
	typeNull uint8 = 1 << iota
	typeBoolean
	typeString
	typeObject
	typeArray
	typeNumber
	typeInteger
)

var typeBits = map[string]uint8{
	"null": typeNull, "boolean": typeBoolean, "string": typeString, "object": typeObject,
	"array": typeArray, "number": typeNumber, "integer": typeInteger,
}

// shapeFields are the fields of jsonschema.Schema a shape reads, or that
// the validator does not read (annotations, and what only a $ref could
// reach); any other field set means no shape. A field a newer validator
// adds is therefore never ignored: it is outside this list.
var shapeFields = map[string]bool{
	// read by shapeOf
	"Schema": true, "Type": true, "Types": true, "Properties": true, "Required": true,
	"AdditionalProperties": true, "Items": true,
	// not read by the validator
	"ID": true, "Comment": true, "Defs": true, "Definitions": true, "Anchor": true, "DynamicAnchor": true,
	"Title": true, "Description": true, "Default": true, "Deprecated": true, "ReadOnly": true,
	"WriteOnly": true, "Examples": true, "Format": true, "ContentEncoding": true,
	"ContentMediaType": true, "Extra": true, "PropertyOrder": true,
}

// shapeVersions are the $schema values the validator validates ("" is
// its default); another makes Validate fail, which a shape cannot say.
var shapeVersions = map[string]bool{
	"": true,
	"http://json-schema.org/draft-07/schema#":      true,
	"https://json-schema.org/draft-07/schema#":     true,
	"https://json-schema.org/draft/2020-12/schema": true,
}

// shapeOf is the shape of the root of a resolved schema, nil when it has
// none.
func shapeOf(rs *jsonschema.Resolved) *shape {
	if rs == nil {
		return nil
	}
	s := rs.Schema()
	if s == nil || !shapeVersions[s.Schema] {
		return nil
	}
	return shapeOfSchema(s, 0)
}

// maxShapeDepth bounds the schemas given a shape (and the recursion of
// a check): deeper ones are validated as before.
const maxShapeDepth = 16

func shapeOfSchema(s *jsonschema.Schema, depth int) *shape {
	if s == nil || depth > maxShapeDepth {
		return nil
	}
	v := reflect.ValueOf(s).Elem()
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		if !shapeFields[t.Field(i).Name] && !v.Field(i).IsZero() {
			return nil
		}
	}
	out := &shape{}
	switch {
	case s.Type != "" && s.Types != nil:
		return nil
	case s.Type != "":
		b, ok := typeBits[s.Type]
		if !ok {
			return nil
		}
		out.types = b
	case s.Types != nil:
		if len(s.Types) == 0 {
			return nil // allows nothing: the validator words it
		}
		for _, name := range s.Types {
			b, ok := typeBits[name]
			if !ok {
				return nil
			}
			out.types |= b
		}
	}
	if out.types&typeNumber != 0 {
		// "number" subsumes integers.
		out.types |= typeInteger
	}
	if len(s.Properties) > 0 {
		out.props = make(map[string]*shape, len(s.Properties))
		for name, p := range s.Properties {
			ps := shapeOfSchema(p, depth+1)
			if ps == nil {
				return nil
			}
			out.props[name] = ps
		}
	}
	out.required = s.Required
	if a := s.AdditionalProperties; a != nil {
		if a.Not != nil && reflect.ValueOf(*a.Not).IsZero() && isOnlyNot(a) {
			out.closed = true
		} else if out.additional = shapeOfSchema(a, depth+1); out.additional == nil {
			return nil
		}
	}
	if s.Items != nil {
		if out.items = shapeOfSchema(s.Items, depth+1); out.items == nil {
			return nil
		}
	}
	return out
}

// isOnlyNot: s has no keyword but not (false, as the validator reads
// additionalProperties: false).
func isOnlyNot(s *jsonschema.Schema) bool {
	c := *s
	c.Not = nil
	return reflect.ValueOf(c).IsZero()
}

// validObject reports whether raw, a JSON object, certainly validates
// against sh; false also when it cannot tell (the caller then asks the
// validator).
func (sh *shape) validObject(raw []byte) bool {
	t := bytes.TrimLeft(raw, " \t\r\n")
	if len(t) == 0 || t[0] != '{' {
		return false
	}
	return sh.valid(t, 0)
}

// valid reports whether the JSON value raw certainly validates against
// sh.
func (sh *shape) valid(raw []byte, depth int) bool {
	if depth > maxShapeDepth {
		return false
	}
	typ, ok := rawType(raw)
	if !ok || sh.types != 0 && sh.types&typ == 0 {
		return false
	}
	switch typ {
	case typeObject:
		if sh.props == nil && sh.required == nil && !sh.closed && sh.additional == nil {
			return true
		}
		return sh.validMembers(raw, depth)
	case typeArray:
		if sh.items == nil {
			return true
		}
		return jsonrpc.Elems(raw, func(v []byte) bool { return sh.items.valid(v, depth+1) })
	}
	return true
}

// validMembers checks the members of the object raw: each named one
// against its shape, the others against additionalProperties, and that
// the required ones are there. A member that comes twice is checked each
// time (a decoder keeps one of them: both must pass).
func (sh *shape) validMembers(raw []byte, depth int) bool {
	var seen [8]bool
	var seenMore map[string]bool
	bad := false
	ok := jsonrpc.Each(raw, func(k, v []byte) bool {
		if bytes.IndexByte(k, '\\') >= 0 || !utf8.Valid(k) {
			// Named otherwise once decoded: the validator decides.
			bad = true
			return false
		}
		if p, named := sh.props[string(k)]; named {
			bad = !p.valid(v, depth+1)
		} else {
			bad = sh.closed || sh.additional != nil && !sh.additional.valid(v, depth+1)
		}
		if bad {
			return false
		}
		for i, r := range sh.required {
			if r != string(k) {
				continue
			}
			if i < len(seen) {
				seen[i] = true
			} else {
				if seenMore == nil {
					seenMore = map[string]bool{}
				}
				seenMore[r] = true
			}
		}
		return true
	})
	if !ok || bad {
		return false
	}
	for i, r := range sh.required {
		if i < len(seen) && !seen[i] || i >= len(seen) && !seenMore[r] {
			return false
		}
	}
	return true
}

// rawType is the JSON type of the value raw as the validator sees it
// decoded: a number is an integer when it has no fraction (1.0 is one,
// as float64 has it). ok is false for a number float64 cannot hold
// (decoding it fails) and for what is no JSON value.
func rawType(raw []byte) (uint8, bool) {
	if len(raw) == 0 {
		return 0, false
	}
	switch raw[0] {
	case '"':
		return typeString, true
	case '{':
		return typeObject, true
	case '[':
		return typeArray, true
	case 't', 'f':
		return typeBoolean, true
	case 'n':
		return typeNull, true
	}
	if !jsonrpc.IsNumber(raw) {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil {
		return 0, false
	}
	if _, frac := math.Modf(f); frac == 0 {
		return typeInteger, true
	}
	return typeNumber, true
}

package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/pml-dev/pml/internal/jsonpos"
)

// keyLines maps each key of a JSON document to the line it is on: object
// members by their dotted path ("permissions.deny"), list items by index
// ("permissions.deny[1]"). Errors about a key then say where to look,
// which matters most when a live edit is refused and the person has only
// the log. A document that does not parse maps nothing.
func keyLines(data []byte) map[string]int {
	out := map[string]int{}
	dec := json.NewDecoder(bytes.NewReader(data))
	var walk func(path string) error
	walk = func(path string) error {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'):
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return err
				}
				name, _ := k.(string)
				key := name
				if path != "" {
					key = path + "." + name
				}
				line, _ := jsonpos.LineCol(data, dec.InputOffset())
				out[key] = line
				if err := walk(key); err != nil {
					return err
				}
			}
			_, err = dec.Token()
			return err
		case json.Delim('['):
			for i := 0; dec.More(); i++ {
				key := fmt.Sprintf("%s[%d]", path, i)
				line, _ := jsonpos.LineCol(data, skipSep(data, dec.InputOffset()))
				out[key] = line
				if err := walk(key); err != nil {
					return err
				}
			}
			_, err = dec.Token()
			return err
		}
		return nil
	}
	_ = walk("")
	return out
}

// lineOf finds the line of key, or of the nearest enclosing key that is
// in the file (a key named with a sub-part, "mcps.x.env.A", whose
// enclosing object is what the file has).
func lineOf(lines map[string]int, key string) int {
	for key != "" {
		if l, ok := lines[key]; ok {
			return l
		}
		i := strings.LastIndexAny(key, ".[")
		if i < 0 {
			return 0
		}
		key = key[:i]
	}
	return 0
}

// placeErrors adds the line to every error about a key of the file at
// path (errors from the environment keep their variable name instead).
func placeErrors(path string, data []byte, errs []error) {
	if len(data) == 0 {
		return
	}
	var lines map[string]int
	for _, err := range errs {
		var e *Error
		if !errors.As(err, &e) || e.File != path || e.Key == "" || e.Line > 0 {
			continue
		}
		if lines == nil {
			lines = keyLines(data)
		}
		e.Line = lineOf(lines, e.Key)
	}
}

// skipSep moves off past the blanks and the comma before the next value.
func skipSep(data []byte, off int64) int64 {
	for off < int64(len(data)) && strings.IndexByte(" \t\r\n,", data[off]) >= 0 {
		off++
	}
	return off
}

// Package jsonpos turns the byte offsets encoding/json reports into the
// line and column a person looks for in an editor.
package jsonpos

// LineCol turns the offset a JSON decoder reports (just past the
// offending byte, as json.SyntaxError.Offset) into a 1-based line and
// column. An offset past the end counts to the end of data.
func LineCol(data []byte, offset int64) (line, col int) {
	line, col = 1, 1
	for i := int64(0); i < offset-1 && i < int64(len(data)); i++ {
		if data[i] == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return line, col
}

package tools

import (
	"slices"
	"testing"
)

func TestExportedFunctionsOfEveryShape(t *testing.T) {
	for _, c := range []struct {
		code, fqdn string
		want       []string
		exports    map[string]string
	}{
		{"export default (args: { text: string }) => args.text.toUpperCase();\n", "acme.tools.text.upper", []string{"upper"}, map[string]string{"upper": "default"}},
		{"export default async function (a) { return a }\n", "acme.tools.text.upper.32ab", []string{"upper"}, map[string]string{"upper": "default"}},
		{"export default x => x\n", "acme.tools.text.upper", []string{"upper"}, map[string]string{"upper": "default"}},
		{"export function upper(a) {}\nexport default (a) => a\n", "acme.tools.text.upper", []string{"upper"}, map[string]string{"upper": "upper"}},
		{"export async function a() {}\nexport const b = async (x) => x;\nexport let c = function () {}\n", "acme.tools.t.x", []string{"a", "b", "c"}, map[string]string{"b": "b", "c": "c"}},
		{"export const notFn = 3;\nexport default 42;\n", "acme.tools.t.x", nil, map[string]string{"x": "x"}},
		{"export default (a) => a\n", "not an fqdn", nil, nil},
	} {
		if got := ExportedFunctions(c.code, c.fqdn); !slices.Equal(got, c.want) {
			t.Errorf("%q: %v, want %v", c.code, got, c.want)
		}
		for fn, want := range c.exports {
			if got := ExportFor(c.code, c.fqdn, fn); got != want {
				t.Errorf("%q: the tool %s runs export %q, want %q", c.code, fn, got, want)
			}
		}
	}
}

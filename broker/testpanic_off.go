//go:build !pmlpanic

package broker

// testPanic is a no-op in pml's builds; a build with the pmlpanic tag
// (e2e only) panics here on purpose (testpanic_on.go).
func testPanic(string, map[string]any) {}

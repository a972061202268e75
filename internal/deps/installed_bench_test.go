package deps

import "testing"

// What Installed costs on a warm call of a server with dependencies:
// deps.json and the tree's place kept (seen.go), as they are once the
// file is settleTime old.
//
//	go test -run '^$' -bench BenchmarkInstalled -benchmem ./internal/deps
func BenchmarkInstalled(b *testing.B) {
	ws := b.TempDir()
	srv := vouchServer()
	installTree(b, NewStore(ws), srv)
	was := settleTime
	settleTime = 0
	b.Cleanup(func() { settleTime = was })
	s := NewStore(ws)
	if !s.Installed(srv) {
		b.Fatal("pml's own install is not installed")
	}
	b.ReportAllocs()
	for b.Loop() {
		s.Installed(srv)
	}
}

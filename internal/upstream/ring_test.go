package upstream

import (
	"strings"
	"testing"
)

func TestRingKeepsTheLastLines(t *testing.T) {
	r := NewRing(3, 1000)
	for _, s := range []string{"one\ntwo\n", "thr", "ee\nfour\nfive"} {
		if _, err := r.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	// Three complete lines are kept, plus the unfinished one.
	if got := r.Tail(10); got != "two\nthree\nfour\nfive" {
		t.Fatalf("Tail = %q", got)
	}
	if got := r.Tail(1); got != "five" {
		t.Fatalf("Tail(1) = %q", got)
	}
}

func TestRingIsBoundedInBytes(t *testing.T) {
	r := NewRing(100, 64)
	r.Write([]byte(strings.Repeat("x", 500)))
	r.Write([]byte("\nlast\n"))
	if got := r.Tail(100); len(got) > 200 || !strings.HasSuffix(got, "last") {
		t.Fatalf("Tail = %d bytes: %q", len(got), got)
	}
}

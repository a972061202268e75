package main

import "testing"

func TestStdioProcessors(t *testing.T) {
	for _, c := range []struct {
		env    string
		choice int
		want   int
	}{
		{"", 1, 1},
		{"", 2, 1},
		{"", 3, 1},
		{"", 4, 2},
		{"", 64, 32},
		{"2", 2, 2}, // the person's GOMAXPROCS stands
		{"8", 8, 8},
	} {
		if got := stdioProcessors(c.env, c.choice); got != c.want {
			t.Errorf("stdioProcessors(%q, %d) = %d, want %d", c.env, c.choice, got, c.want)
		}
	}
}

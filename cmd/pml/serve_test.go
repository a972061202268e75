package main

import (
	"strings"
	"testing"
)

// TestServeTokenMustBeASecret: a chosen PML_SERVE_TOKEN shorter than 16
// characters is refused with how to make one; unset (pml generates one)
// and a long one are taken.
func TestServeTokenMustBeASecret(t *testing.T) {
	for _, tok := range []string{"x", "secret", strings.Repeat("a", minServeToken-1), " " + strings.Repeat("a", 20)} {
		err := checkServeToken(tok)
		if err == nil {
			t.Errorf("token %q accepted", tok)
			continue
		}
		if strings.Contains(err.Error(), tok) && len(tok) > 1 {
			t.Errorf("the error repeats the token: %v", err)
		}
	}
	if err := checkServeToken("x"); err == nil || !strings.Contains(err.Error(), "openssl rand -hex 24") || !strings.Contains(err.Error(), "has only 1 character(s)") {
		t.Errorf("the error does not say how to make one: %v", err)
	}
	for _, tok := range []string{"", strings.Repeat("a", minServeToken), "0123456789abcdef0123456789abcdef"} {
		if err := checkServeToken(tok); err != nil {
			t.Errorf("token of %d characters refused: %v", len(tok), err)
		}
	}
}

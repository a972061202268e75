package images

import (
	"strings"
	"testing"
)

func TestParseRefNormalizesToTheEnginesFamiliarForm(t *testing.T) {
	d := "sha256:" + strings.Repeat("ab", 32)
	cases := []struct {
		in                string
		name, tag, digest string
	}{
		{"busybox", "busybox", "latest", ""},
		{"docker.io/library/busybox:1.36", "busybox", "1.36", ""},
		{"index.docker.io/denoland/deno:2.9.6", "denoland/deno", "2.9.6", ""},
		{"pml/node:18", "pml/node", "18", ""},
		{"127.0.0.1:5000/x/y@" + d, "127.0.0.1:5000/x/y", "", d},
		{"ghcr.io/o/r:1.2@" + d, "ghcr.io/o/r", "1.2", d},
		{"localhost/a", "localhost/a", "latest", ""},
		{"[::1]:5000/a:b", "[::1]:5000/a", "b", ""},
	}
	for _, c := range cases {
		r, err := ParseRef(c.in)
		if err != nil {
			t.Errorf("%s: %v", c.in, err)
			continue
		}
		if r.Name != c.name || r.Tag != c.tag || r.Digest != c.digest {
			t.Errorf("%s = %+v, want %s %s %s", c.in, r, c.name, c.tag, c.digest)
		}
	}
}

func TestParseRefRefusesWhatTheEngineWouldRefuse(t *testing.T) {
	for _, in := range []string{"", " busybox", "x@sha256:abc", "x@md5:" + strings.Repeat("a", 32),
		"x:-bad", "x:" + strings.Repeat("a", 129), "a//b", "a/B:1", ":tag", "x y"} {
		if _, err := ParseRef(in); err == nil {
			t.Errorf("%q was accepted", in)
		} else if !strings.Contains(err.Error(), "image reference") {
			t.Errorf("%q: error does not say what it is about: %v", in, err)
		}
	}
}

func TestDigestTagIsDerivedFromTheDigest(t *testing.T) {
	d := "sha256:" + strings.Repeat("0f", 32)
	if got := DigestTag("r.io/a/b:1@" + d); got != "r.io/a/b:sha256-"+strings.Repeat("0f", 32) {
		t.Errorf("DigestTag = %q", got)
	}
	if got := DigestTag("a/b:1"); got != "" {
		t.Errorf("no digest, no digest tag: %q", got)
	}
	if _, err := ParseRef(DigestTag("a@" + d)); err != nil {
		t.Errorf("the digest tag must itself be a valid reference: %v", err)
	}
}

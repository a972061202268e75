package registry

import (
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
)

func TestParseFQDNAcceptsFourAndFivePartNames(t *testing.T) {
	for _, tc := range []struct {
		in         string
		base, tool string
		hash       string
	}{
		{"pml.mcp.filesystem.read_file.7b92", "pml.mcp.filesystem.read_file", "filesystem:read_file", "7b92"},
		{"pml.std.filesystem.read_file", "pml.std.filesystem.read_file", "filesystem:read_file", ""},
		{"casys.pml.old-tool.server.00ff", "casys.pml.old-tool.server", "old-tool:server", "00ff"},
	} {
		f, err := ParseFQDN(tc.in)
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		if f.Base() != tc.base || f.Tool() != tc.tool || f.Hash != tc.hash || f.String() != tc.in {
			t.Errorf("%s parsed as %+v (base %s, tool %s)", tc.in, f, f.Base(), f.Tool())
		}
	}
}

func TestParseFQDNRefusesEverythingElseWithAReason(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "4 or 5 dot-separated parts"},
		{"pml.mcp.filesystem", "got 3 part(s)"},
		{"a.b.c.d.e.f", "got 6 part(s)"},
		{"pml.mcp.FileSystem.read", `namespace part "FileSystem"`},
		{"pml.mcp..read", `namespace part ""`},
		{"pml.mcp.fs.read.7B92", `hash "7B92" must be 4 lowercase hex`},
		{"pml.mcp.fs.read.7b9", `hash "7b9"`},
		{"pml.mcp.fs.read.zzzz", `hash "zzzz"`},
		{"../etc.passwd.x", `org part ""`},
		{"pml.mcp.a/b.read", `namespace part "a/b"`},
		{"pml.mcp.a%2fb.read", `namespace part "a%2fb"`},
		{"pml.mcp.-x.read", `namespace part "-x"`},
	} {
		_, err := ParseFQDN(tc.in)
		if err == nil {
			t.Errorf("%q parsed", tc.in)
			continue
		}
		if !errors.Is(err, ErrInvalidFQDN) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %q does not say %q", tc.in, err, tc.want)
		}
	}
}

func TestIntegrityIsHexSHA256AndHashIsItsFirstFourDigits(t *testing.T) {
	// sha256("") = e3b0c442…
	in := Integrity(nil)
	if in != "sha256-e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
		t.Fatalf("Integrity(\"\") = %s", in)
	}
	if h, err := HashOf(in); err != nil || h != "e3b0" {
		t.Fatalf("HashOf = %q, %v", h, err)
	}
}

func TestSRIIntegrityIsVerifiedToo(t *testing.T) {
	content := []byte("export default 1;\n")
	s256 := sha256.Sum256(content)
	s512 := sha512.Sum512(content)
	for _, sri := range []string{
		"sha256-" + base64.StdEncoding.EncodeToString(s256[:]),
		"sha512-" + base64.StdEncoding.EncodeToString(s512[:]),
	} {
		if err := verifyIntegrity(sri, content); err != nil {
			t.Errorf("%s: %v", sri, err)
		}
		if err := verifyIntegrity(sri, []byte("tampered")); err == nil {
			t.Errorf("%s accepted other content", sri)
		}
	}
	for _, bad := range []string{"md5-abc", "sha256-", "sha256-xyz", "sha256-" + strings.Repeat("A", 64), "sha256"} {
		if _, err := HashOf(bad); err == nil {
			t.Errorf("HashOf(%q) accepted", bad)
		}
	}
}

func TestCanonicalMetadataIgnoresLayoutNameAndIntegrity(t *testing.T) {
	a := []byte(`{"type":"stdio","tools":["x:y"],"n":1.50,"nested":{"b":1,"a":"<&>"}}`)
	b := []byte(`{
	  "nested": {"a": "<&>", "b": 1},
	  "fqdn": "o.p.x.y.abcd", "integrity": "sha256-whatever",
	  "n": 1.50, "tools": ["x:y"], "type": "stdio"
	}`)
	ca, err := CanonicalMetadata(a)
	if err != nil {
		t.Fatal(err)
	}
	cb, err := CanonicalMetadata(b)
	if err != nil {
		t.Fatal(err)
	}
	if string(ca) != string(cb) {
		t.Fatalf("canonical forms differ:\n%s\n%s", ca, cb)
	}
	again, _ := CanonicalMetadata(ca)
	if string(again) != string(ca) {
		t.Fatalf("not idempotent: %s vs %s", again, ca)
	}
	if !strings.Contains(string(ca), `"n":1.50`) {
		t.Errorf("numbers must stay as written: %s", ca)
	}
	for _, bad := range []string{`[]`, `null`, `{"a":1} {}`, `{`} {
		if _, err := CanonicalMetadata([]byte(bad)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

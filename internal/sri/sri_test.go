package sri

import (
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		name, in, wantErr string
	}{
		{"a sha512 hash of 64 bytes is accepted", "sha512-ljj/3S4aGjxdNSQWw6gucKKGnTLdBPWxzapyY/MT2tOVyZwvxChvevXSLPwx59nKJAlVpUVW+cOlnVRXRwiqMQ==", ""},
		{"a sha256 hash of 32 bytes is accepted", "sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=", ""},
		{"a sha384 hash of 48 bytes is accepted", "sha384-" + strings.Repeat("A", 64), ""},
		{"an unknown algorithm is not an SRI hash", "md5-abc", "is not an SRI hash"},
		{"an empty string is not an SRI hash", "", "is not an SRI hash"},
		{"a digest of the wrong length names the expected size", "sha256-AAAA", "expected 32 bytes"},
		{"a digest that is not base64 is refused", "sha512-A", "expected 64 bytes"},
		{"text after the padding is refused", "sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU= x", "is not an SRI hash"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := Check(c.in)
			switch {
			case c.wantErr == "" && err != nil:
				t.Fatalf("Check(%q) = %v, want nil", c.in, err)
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
				t.Fatalf("Check(%q) = %v, want an error containing %q", c.in, err, c.wantErr)
			}
		})
	}
}

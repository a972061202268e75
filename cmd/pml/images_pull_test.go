package main

import (
	"testing"

	"github.com/pml-dev/pml/images"
)

func TestWantForMatchesByNameAndTagOrDigest(t *testing.T) {
	d := "sha256:" + "ab" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcd"
	mk := func(s, pin string) images.Want {
		r, err := images.ParseRef(s)
		if err != nil {
			t.Fatal(err)
		}
		return images.Want{Ref: r, Pin: pin}
	}
	wants := []images.Want{mk("reg.example:5000/team/app:v1", d), mk("pml/shell:busybox", "")}
	cases := []struct {
		ref  string
		want string // the Want's ref, "" for none
	}{
		{"reg.example:5000/team/app:v1", "reg.example:5000/team/app:v1"},
		{"reg.example:5000/team/app@" + d, "reg.example:5000/team/app:v1"},
		{"reg.example:5000/team/app:v2", ""},
		{"pml/shell:busybox", "pml/shell:busybox"},
		{"other/app:v1", ""},
		{"::not a ref", ""},
	}
	for _, c := range cases {
		w, ok := wantFor(wants, c.ref)
		got := ""
		if ok {
			got = w.Ref.String()
		}
		if got != c.want {
			t.Errorf("wantFor(%q) = %q, want %q", c.ref, got, c.want)
		}
	}
}

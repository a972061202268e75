package config

import (
	"errors"
	"strings"
	"testing"
)

func TestAddServerDataKeepsTheFileAndRefusesAClash(t *testing.T) {
	in := []byte(`{"custom": 1, "permissions": {"allow": ["filesystem:*"]}, "mcps": {"a": {"image": "x"}}}`)
	out, err := AddServerData("p", in, "b", []byte(`{"image": "y", "command": "node"}`), true)
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	if !strings.Contains(s, `"custom": 1`) || !strings.Contains(s, `"b": {`) || !strings.Contains(s, `"b:*"`) || strings.Index(s, `"a"`) > strings.Index(s, `"b"`) {
		t.Errorf("after add:\n%s", s)
	}
	if _, err := AddServerData("p", out, "a", []byte(`{}`), false); !errors.Is(err, ErrServerExists) {
		t.Errorf("a clash: %v", err)
	}
	back, err := RemoveServerData("p", out, "b")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(back), `"b"`) || strings.Contains(string(back), "b:*") || !strings.Contains(string(back), `"a"`) {
		t.Errorf("after remove:\n%s", back)
	}
	if none, err := RemoveServerData("p", back, "zzz"); none != nil || err != nil {
		t.Errorf("removing what is not there: %s %v", none, err)
	}
}

package netallow

import "testing"

func TestMatching(t *testing.T) {
	es, err := ParseList([]string{"api.github.com:443", "*.example.org", "10.0.0.5:5432", "[::1]:8080"})
	if err != nil {
		t.Fatal(err)
	}
	r := Rules{Allow: es}
	for _, c := range []struct {
		host    string
		port    int
		ok      bool
		literal bool
	}{
		{"api.github.com", 443, true, true},
		{"api.github.com", 80, false, false},
		{"github.com", 443, false, false},
		{"evilapi.github.com", 443, false, false},
		{"a.example.org", 80, true, false},
		{"a.b.example.org", 443, true, false},
		{"example.org", 443, false, false},
		{"badexample.org", 443, false, false},
		{"10.0.0.5", 5432, true, true},
		{"::1", 8080, true, true},
		{"[::1]", 8080, true, true},
		{"::ffff:10.0.0.5", 5432, true, true},
	} {
		e, ok := r.Find(c.host, c.port)
		if ok != c.ok || ok && e.Literal() != c.literal {
			t.Errorf("%s:%d: found %v (%+v), want %v literal %v", c.host, c.port, ok, e, c.ok, c.literal)
		}
	}
}

func TestAnExactEntryWinsOverAWildcard(t *testing.T) {
	es, _ := ParseList([]string{"*.svc.test:80", "db.svc.test:80"})
	if e, _ := (Rules{Allow: es}).Find("db.svc.test", 80); !e.Literal() {
		t.Errorf("found %+v, want the exact entry", e)
	}
}

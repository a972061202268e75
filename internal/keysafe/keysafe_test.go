package keysafe

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

func TestSecure(t *testing.T) {
	for raw, want := range map[string]bool{
		"https://pml.casys.ai":           true,
		"https://10.0.0.1:8443/x":        true,
		"http://127.0.0.1:8080":          true,
		"http://127.5.6.7":               true,
		"http://[::1]:80":                true,
		"http://localhost:3000":          true,
		"http://LOCALHOST.":              true,
		"http://pml-cloud.invalid":       false,
		"http://10.0.0.1":                false,
		"http://0.0.0.0:80":              false,
		"http://localhost.evil.example":  false,
		"http://127.0.0.1.nip.io":        false,
		"http://user:pw@pml-cloud.test/": false,
		"ftp://127.0.0.1":                false,
		"127.0.0.1:80":                   false,
		"https://":                       false,
	} {
		u, err := url.Parse(raw)
		if err != nil {
			u = nil
		}
		if got := Secure(u); got != want {
			t.Errorf("Secure(%s) = %v, want %v", raw, got, want)
		}
	}
}

// noDial is a transport that fails the test if anything is sent at all:
// a refusal must come before any dial (and no non-loopback address is
// ever dialled by these tests).
type noDial struct{ t *testing.T }

func (n noDial) RoundTrip(r *http.Request) (*http.Response, error) {
	n.t.Errorf("a request carrying a key was sent to %s", r.URL)
	return nil, errors.New("not sent")
}

func TestAPlainHTTPEndpointIsRefusedBeforeAnyDial(t *testing.T) {
	hc := &http.Client{Transport: noDial{t}}
	for _, base := range []string{"http://pml-cloud.invalid", "http://10.1.2.3:8080", "http://someone:secret@pml-cloud.invalid"} {
		req, _ := http.NewRequest(http.MethodPost, base+"/mcp", nil)
		req.Header.Set("x-api-key", "k")
		resp, err := Do(hc, req, "cloud.url", base)
		if resp != nil {
			resp.Body.Close()
		}
		var re *RefusedError
		if !errors.As(err, &re) || !errors.Is(err, ErrInsecure) {
			t.Fatalf("%s: %v, want a refusal", base, err)
		}
		msg := err.Error()
		if !strings.Contains(msg, "cloud.url http://") || !strings.Contains(msg, "is not https") || !strings.Contains(msg, "https://") {
			t.Errorf("%s: the refusal does not name the endpoint and what to do: %s", base, msg)
		}
		if strings.Contains(msg, "secret") {
			t.Errorf("the refusal repeats a password from the URL: %s", msg)
		}
	}
	// The configured endpoint is fine but the request's is not (a path
	// that is really another URL): refused too.
	req, _ := http.NewRequest(http.MethodGet, "http://pml-cloud.invalid/routing", nil)
	if _, err := Do(hc, req, "cloud.url", "https://pml.casys.ai"); !errors.Is(err, ErrInsecure) {
		t.Errorf("a request to another endpoint than the configured one: %v", err)
	}
}

func TestARedirectToPlainHTTPIsNotFollowed(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://pml-cloud.invalid/steal", http.StatusFound)
	}))
	defer srv.Close()
	// Only loopback is ever dialled: the transport refuses anything else.
	tr := &loopbackOnly{t: t, next: srv.Client().Transport}
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/routing", nil)
	req.Header.Set("x-api-key", "k")
	resp, err := Do(&http.Client{Transport: tr}, req, "cloud.url", srv.URL)
	if resp != nil {
		resp.Body.Close()
	}
	var re *RefusedError
	if !errors.As(err, &re) || !re.Redirect || !strings.Contains(err.Error(), "http://pml-cloud.invalid/steal") {
		t.Fatalf("a redirect to plain http: %v", err)
	}
}

type loopbackOnly struct {
	t    *testing.T
	next http.RoundTripper
}

func (l *loopbackOnly) RoundTrip(r *http.Request) (*http.Response, error) {
	if !Loopback(r.URL.Hostname()) {
		l.t.Errorf("dialled %s", r.URL)
		return nil, errors.New("not dialled")
	}
	return l.next.RoundTrip(r)
}

func TestKeysAreNotCarriedToAnotherOrigin(t *testing.T) {
	got := make(chan http.Header, 1)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
		_, _ = io.WriteString(w, "ok")
	}))
	defer other.Close()
	// Same address, other origin: "localhost" instead of 127.0.0.1.
	target := strings.Replace(other.URL, "127.0.0.1", "localhost", 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target+"/elsewhere", http.StatusTemporaryRedirect)
	}))
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/routing", nil)
	req.Header.Set("x-api-key", "k")
	req.Header.Set("X-PML-BYOK-TAVILY_API_KEY", "t")
	req.Header.Set("X-PML-Client", "package")
	resp, err := Do(&http.Client{}, req, "cloud.url", srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	h := <-got
	if h.Get("x-api-key") != "" || h.Get("X-PML-BYOK-TAVILY_API_KEY") != "" {
		t.Errorf("keys were carried to another origin: %v", h)
	}
	if h.Get("X-PML-Client") != "package" {
		t.Errorf("other headers were dropped too: %v", h)
	}
}

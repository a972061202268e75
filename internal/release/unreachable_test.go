package release

import (
	"context"
	"errors"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
)

// TestUnreachableSaysWhyInAFewWords: the resolver's or dialer's error
// chain becomes a few words, and the message names PML_RELEASES_URL.
func TestUnreachableSaysWhyInAFewWords(t *testing.T) {
	dial := func(err error) error {
		return &url.Error{Op: "Get", URL: "https://github.com/pml-dev/pml/releases/latest", Err: &net.OpError{Op: "dial", Net: "tcp", Err: err}}
	}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{dial(&net.DNSError{Err: "no such host", Name: "github.com", Server: "127.0.0.53:53", IsNotFound: true}), "the name github.com does not resolve"},
		{dial(&os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}), "the connection was refused"},
		{dial(&os.SyscallError{Syscall: "connect", Err: syscall.ENETUNREACH}), "no route to it"},
		{&url.Error{Op: "Get", URL: "u", Err: context.DeadlineExceeded}, "it did not answer in time"},
		{&url.Error{Op: "Get", URL: "u", Err: errors.New("something else")}, "something else"},
	} {
		msg := (&UnreachableError{URL: DefaultURL, Err: tc.err}).Error()
		if !strings.Contains(msg, tc.want) || !strings.Contains(msg, "PML_RELEASES_URL") || strings.Contains(msg, "127.0.0.53") || strings.Contains(msg, "\n") {
			t.Errorf("%v: %q, want one line with %q and PML_RELEASES_URL", tc.err, msg, tc.want)
		}
	}
}

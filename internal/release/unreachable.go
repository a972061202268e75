package release

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"syscall"
)

// UnreachableError: the releases URL did not answer (offline, a name that
// does not resolve, a refused connection). Its message is one line that
// names PML_RELEASES_URL, not the resolver's whole story.
type UnreachableError struct {
	URL string
	Err error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("could not reach %s to find the latest release: %s; check the network, or set PML_RELEASES_URL to a mirror of pml's releases that you can reach", e.URL, reason(e.Err))
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// reason says in a few words why a request failed.
func reason(err error) string {
	var dns *net.DNSError
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	switch {
	case errors.As(err, &dns):
		return "the name " + dns.Name + " does not resolve"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "the connection was refused"
	case errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.EHOSTUNREACH):
		return "no route to it"
	case errors.Is(err, context.DeadlineExceeded), isTimeout(err):
		return "it did not answer in time"
	case errors.As(err, &unknownCA), errors.As(err, &hostname):
		return "its TLS certificate is not trusted here"
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return err.Error()
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

package engine

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	// The docker CLI's own context store reads contexts/meta and
	// contexts/tls exactly as `docker context` writes them (names hashed
	// into directories, typed endpoints, TLS files per endpoint). Only
	// this package of docker/cli is used: it needs go-digest, sortorder
	// and pieces of docker/docker already in the build, unlike
	// cli/command or cli/context/docker, which bring the whole CLI.
	"github.com/docker/cli/cli/context/store"
)

// dockerEndpoint is the "docker" endpoint of a context's meta.json, the
// two fields of docker/cli's EndpointMeta that say where the engine is.
type dockerEndpoint struct {
	Host          string `json:",omitempty"`
	SkipTLSVerify bool
}

const dockerEndpointName = "docker"

// fromContext reads the endpoint of context name from the store under
// dir/contexts. why says who named the context, for errors.
func fromContext(dir, name, why string) (Endpoint, error) {
	root := filepath.Join(dir, "contexts")
	s := store.New(root, store.NewConfig(
		func() any { return &map[string]any{} },
		store.EndpointTypeGetter(dockerEndpointName, func() any { return &dockerEndpoint{} }),
	))
	info := s.GetStorageInfo(name)
	ep := Endpoint{Context: name, ContextMeta: filepath.Join(info.MetadataPath, "meta.json")}
	meta, err := s.GetMetadata(name)
	if errors.Is(err, fs.ErrNotExist) {
		return ep, fmt.Errorf("%w: context %q (%s) does not exist: no %s; see `docker context ls`, then `docker context use NAME`, or set DOCKER_HOST or pass --host", ErrConfig, name, why, ep.ContextMeta)
	}
	if err != nil {
		return ep, fmt.Errorf("%w: context %q (%s): %w", ErrConfig, name, why, err)
	}
	// The store returns the typed endpoint by value.
	d, _ := meta.Endpoints[dockerEndpointName].(dockerEndpoint)
	if d.Host == "" {
		return ep, fmt.Errorf("%w: context %q (%s, %s) has no docker endpoint host; see `docker context inspect %s`", ErrConfig, name, why, ep.ContextMeta, name)
	}
	if err := checkHost(d.Host, fmt.Sprintf("the host of Docker context %q (%s)", name, ep.ContextMeta)); err != nil {
		return ep, err
	}
	ep.Host = d.Host
	tls, err := contextTLS(s, name, info.TLSPath)
	if err != nil {
		return ep, fmt.Errorf("%w: context %q (%s): reading its TLS files: %w", ErrConfig, name, why, err)
	}
	if tls != nil || d.SkipTLSVerify {
		if tls == nil {
			tls = &TLS{Dir: filepath.Join(info.TLSPath, dockerEndpointName)}
		}
		tls.SkipVerify = d.SkipTLSVerify
	}
	ep.TLS = tls
	return ep, nil
}

// contextTLS reads the docker endpoint's ca.pem, cert.pem and key.pem
// (nil when it has none).
func contextTLS(s *store.ContextStore, name, dir string) (*TLS, error) {
	files, err := s.ListTLSFiles(name)
	if err != nil {
		return nil, err
	}
	names := files[dockerEndpointName]
	if len(names) == 0 {
		return nil, nil
	}
	t := &TLS{Dir: filepath.Join(dir, dockerEndpointName)}
	for _, f := range names {
		var dst *[]byte
		switch f {
		case "ca.pem":
			dst = &t.CA
		case "cert.pem":
			dst = &t.Cert
		case "key.pem":
			dst = &t.Key
		default:
			continue
		}
		b, err := s.GetTLSData(name, dockerEndpointName, f)
		if err != nil {
			return nil, err
		}
		*dst = b
	}
	return t, nil
}

package release

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
)

// maxBinary bounds the extracted pml.
const maxBinary = 512 << 20

// Binary returns the pml executable inside an archive (asset names its
// kind: .zip or .tar.gz): the file named pml (pml.exe) at the archive's
// top level.
func Binary(asset string, archive []byte) ([]byte, error) {
	if strings.HasSuffix(asset, ".zip") {
		return fromZip(asset, archive)
	}
	return fromTarGz(asset, archive)
}

func fromTarGz(asset string, archive []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		return nil, fmt.Errorf("%s is not a gzipped tar archive: %w", asset, err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s holds no pml executable", asset)
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", asset, err)
		}
		if h.Typeflag == tar.TypeReg && path.Clean(h.Name) == "pml" {
			return readBounded(asset, tr)
		}
	}
}

func fromZip(asset string, archive []byte) ([]byte, error) {
	zr, err := zip.NewReader(bytes.NewReader(archive), int64(len(archive)))
	if err != nil {
		return nil, fmt.Errorf("%s is not a zip archive: %w", asset, err)
	}
	for _, f := range zr.File {
		if path.Clean(f.Name) == "pml.exe" && f.Mode().IsRegular() {
			rc, err := f.Open()
			if err != nil {
				return nil, fmt.Errorf("reading %s: %w", asset, err)
			}
			defer rc.Close()
			return readBounded(asset, rc)
		}
	}
	return nil, fmt.Errorf("%s holds no pml.exe", asset)
}

func readBounded(asset string, r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxBinary+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", asset, err)
	}
	if len(b) > maxBinary || len(b) == 0 {
		return nil, fmt.Errorf("%s holds a pml of %d bytes, not a pml executable", asset, len(b))
	}
	return b, nil
}

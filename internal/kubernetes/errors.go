package kubernetes

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/errdefs"
)

// This file is where client-go's errors enter pml: each gets its errdefs
// kind from the API status (or the connection failure) and keeps its
// chain.

// wrap names the operation that failed and classifies err.
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, container.ErrUnavailable) || errors.Is(err, container.ErrImageMissing) {
		return fmt.Errorf("%s: %w", op, err)
	}
	if serverDown(err) {
		return fmt.Errorf("%s: %w: the Kubernetes API server does not answer (%w); check KUBECONFIG and that the cluster runs (kubectl get nodes)", op, container.ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w", op, classify(err))
}

// wrapCreate is wrap for a pod create: a missing namespace says how to
// make it, a forbidden one which permission is missing.
func wrapCreate(ns string, err error) error {
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("creating a pod: namespace %q does not exist: create it (kubectl create namespace %s) or set %s: %w: %w", ns, ns, NamespaceEnv, container.ErrUnavailable, err)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("creating a pod in namespace %q was refused (%v): give pml's account the right to create, watch and delete pods and pods/attach there: %w", ns, apierrors.ReasonForError(err), errdefs.Wrap(errdefs.ErrDenied, err))
	}
	return wrap("creating a pod", err)
}

func serverDown(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) || errors.Is(err, os.ErrNotExist) || errors.Is(err, io.ErrUnexpectedEOF) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err)
}

// isTransient: a watch or read that may succeed when tried again.
func isTransient(err error) bool {
	return serverDown(err) || apierrors.IsTooManyRequests(err) || apierrors.IsInternalError(err)
}

func classify(err error) error {
	switch {
	case apierrors.IsNotFound(err):
		return errdefs.Wrap(errdefs.ErrNotFound, err)
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err):
		return errdefs.Wrap(errdefs.ErrDenied, err)
	case apierrors.IsAlreadyExists(err), apierrors.IsConflict(err):
		return errdefs.Wrap(errdefs.ErrConflict, err)
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		return errdefs.Wrap(errdefs.ErrInvalidInput, err)
	}
	return err
}

func isNotFound(err error) bool  { return err != nil && apierrors.IsNotFound(err) }
func isForbidden(err error) bool { return err != nil && apierrors.IsForbidden(err) }

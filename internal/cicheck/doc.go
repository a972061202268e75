// Package cicheck holds the checks of the project's GitHub Actions
// workflows and release script (its tests): actionlint's, and the
// project's own rules for them (actions pinned by commit, least
// permissions, a timeout on every job). It has no code of its own.
package cicheck

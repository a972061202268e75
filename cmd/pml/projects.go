package main

import (
	"fmt"
	"os"

	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/internal/projects"
	"github.com/pml-dev/pml/internal/workspace"
)

// recordServed notes in the user's state directory that pml serves the
// project at ws, so that `pml images prune` in any project keeps its
// images. A failure costs only that, so it is a warning.
func recordServed(ws string, log zerolog.Logger) {
	s, err := projects.Open(os.Getenv)
	if err == nil {
		err = s.Served(ws)
	}
	if err != nil {
		log.Warn().Err(err).Msg("this project is not recorded: `pml images prune` in another project may remove its images")
	}
}

// recordPulled notes the images pml pulled or loaded for ws (id to
// reference): they are pml's to prune once no project uses them. ws, a
// project prepared for offline work, is recorded too ("" for none).
func recordPulled(g *globals, ws string, images map[string]string) {
	// Home or / is never recorded as a project (workspace.Refused).
	if ws != "" && workspace.Refused(ws, workspace.Home(os.Getenv)) != "" {
		ws = ""
	}
	if len(images) == 0 && ws == "" {
		return
	}
	s, err := projects.Open(os.Getenv)
	if err == nil {
		err = s.AddPulled(ws, images)
	}
	if err != nil {
		fmt.Fprintf(g.warnings(), "the images pml brought here are not recorded, so `pml images prune` will leave them: %v\n", err)
	}
}

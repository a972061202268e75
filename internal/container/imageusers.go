package container

import "context"

// ImageUser is a container, running or stopped, and the image it was
// created from: what the engine itself says about who uses an image,
// whichever user's pml (or other program) created it.
type ImageUser struct {
	ID      string
	Name    string
	ImageID string
	Labels  map[string]string
}

// ImageUsers lists every container of the engine with its image. A
// runtime that implements it lets `pml images prune` keep the images
// other users' projects on a shared engine use.
type ImageUsers interface {
	ListImageUsers(ctx context.Context) ([]ImageUser, error)
}

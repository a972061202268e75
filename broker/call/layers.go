package call

// Layers names the layers of the request path, outermost first: the order
// in which package broker chains them (path.go) and the order every page
// that lists the path gives (docs/architecture.md, CONTRIBUTING.md,
// broker/doc.go, path.go's own comment). TestTheDocsListTheLayersInOrder
// (layers_test.go) checks those pages against it, so a layer added here
// fails that test until the docs say where it stands.
var Layers = []string{"audit", "input", "resolve", "permit", "registry", "pin", "schema", "declared", "approve", "execute"}

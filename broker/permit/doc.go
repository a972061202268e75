// Package permit decides whether a call may go on without a person: the
// permission rules (permissions.go: deny > ask > allow; an exact name in
// allow, what "always" writes, beats a wildcard in ask; a tool its server
// does not list is reached only by an exact allow entry, Unlisted), the live set in force (LivePermissions: read by
// every call, changed by "always", replaced by a reload), the permit
// layer of the request path (layer.go; the path is audit → input →
// resolve → permit → registry → pin → schema → approve → execute), and how the
// policy in force stands against the person's trust records (trust.go).
// A deny ends the call here; ask is the approve layer's (package broker).
package permit

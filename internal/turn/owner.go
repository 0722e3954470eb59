package turn

import "context"

// Owners that are not one person's: the edge (internal/httpapi) gives them,
// and long-term memory (internal/memory) keeps them out.
const (
	// Anonymous owns the sessions of requests that name no caller, when the
	// deployment allows them. No JWT subject may be it.
	Anonymous = "anonymous"
	// IAMPrefix begins the owners that are IAM principals: "iam:" and the
	// ARN. No JWT subject may begin with it.
	IAMPrefix = "iam:"
)

type ownerKey struct{}

// withOwner is ctx for the turns of owner's sessions.
func withOwner(ctx context.Context, owner string) context.Context {
	return context.WithValue(ctx, ownerKey{}, owner)
}

// Owner returns the owner whose session the turn that ctx runs belongs
// to, which the service puts in every turn's context: a tool that keeps
// something per person, such as memory, reads it here, never from the
// model's input.
func Owner(ctx context.Context) (string, bool) {
	o, ok := ctx.Value(ownerKey{}).(string)
	return o, ok && o != ""
}

package cli

import (
	"fmt"
	"strings"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
)

// ConsistencyHelp documents the --consistency values.
const ConsistencyHelp = `consistency of the read: "full" (the newest data), "min" (a recent snapshot the server ` +
	`may serve from cache), "at-least:ZEDTOKEN" (data at least as fresh as a token a write returned) ` +
	`or "exact:ZEDTOKEN" (exactly that snapshot)`

// parseConsistency parses a --consistency value. Zedtokens are base64, which has
// no ':', so the first ':' separates the kind from the token.
func parseConsistency(s string) (*v1.Consistency, error) {
	kind, token, hasToken := strings.Cut(s, ":")
	switch {
	case kind == "full" && !hasToken:
		return &v1.Consistency{Requirement: &v1.Consistency_FullyConsistent{FullyConsistent: true}}, nil
	case kind == "min" && !hasToken:
		return &v1.Consistency{Requirement: &v1.Consistency_MinimizeLatency{MinimizeLatency: true}}, nil
	case kind == "at-least" && token != "":
		return &v1.Consistency{Requirement: &v1.Consistency_AtLeastAsFresh{AtLeastAsFresh: &v1.ZedToken{Token: token}}}, nil
	case kind == "exact" && token != "":
		return &v1.Consistency{Requirement: &v1.Consistency_AtExactSnapshot{AtExactSnapshot: &v1.ZedToken{Token: token}}}, nil
	}
	return nil, fmt.Errorf("--consistency %q: expected full, min, at-least:ZEDTOKEN or exact:ZEDTOKEN", s)
}

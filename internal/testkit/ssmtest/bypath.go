package ssmtest

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/lambda-agent/lambda-agent/internal/testkit/awstest"
)

// MaxResultsByPath is the most parameters a GetParametersByPath page may
// ask for, and the default.
const MaxResultsByPath = 10

// maxLevels is the deepest hierarchy SSM accepts.
const maxLevels = 15

// byPath is a GetParametersByPath request.
type byPath struct {
	path       *string
	recursive  bool
	maxResults *int
	token      *string
	filters    int
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// getParametersByPath answers GetParametersByPath. The caller holds s.mu.
func (s *Server) getParametersByPath(w http.ResponseWriter, in byPath, decrypt bool, region string) {
	switch {
	case in.path == nil:
		validationError("1 validation error detected: Value null at 'path' failed to satisfy constraint: Member must not be null").WriteJSON11(w)
		return
	case len(*in.path) < 1 || len(*in.path) > 2048:
		validationError("1 validation error detected: Value '%s' at 'path' failed to satisfy constraint: Member must have length less than or equal to 2048", *in.path).WriteJSON11(w)
		return
	case in.maxResults != nil && (*in.maxResults < 1 || *in.maxResults > MaxResultsByPath):
		validationError("1 validation error detected: Value '%d' at 'maxResults' failed to satisfy constraint: Member must have value less than or equal to %d and greater than or equal to 1", *in.maxResults, MaxResultsByPath).WriteJSON11(w)
		return
	case in.filters > 0:
		validationError("ssmtest: ParameterFilters are not modeled").WriteJSON11(w)
		return
	}
	path := strings.TrimSpace(*in.path)
	if path != "/" {
		// A path is a name's hierarchy, with or without a slash at its end.
		if aerr := validName(strings.TrimSuffix(path, "/")); aerr != nil {
			aerr.WriteJSON11(w)
			return
		}
		if !strings.HasPrefix(path, "/") {
			validationError("Parameter name must be a fully qualified name.").WriteJSON11(w)
			return
		}
		if strings.Count(strings.TrimSuffix(path, "/"), "/") > maxLevels {
			validationError("ssmtest: the path %s has more than %d levels", path, maxLevels).WriteJSON11(w)
			return
		}
	}
	prefix := strings.TrimSuffix(path, "/") + "/"
	var under []string
	for _, name := range s.order {
		if rest, ok := strings.CutPrefix(name, prefix); ok && rest != "" && (in.recursive || !strings.Contains(rest, "/")) {
			under = append(under, name)
		}
	}

	page := cursor{path: prefix, recursive: in.recursive}
	if in.token != nil {
		c, ok := parseCursor(*in.token)
		if !ok || c.path != page.path || c.recursive != page.recursive || c.offset > len(under) {
			(&awstest.Error{Status: http.StatusBadRequest, Code: "InvalidNextToken", MessageKey: "Message", Message: "The specified token isn't valid."}).WriteJSON11(w)
			return
		}
		page = c
	}
	n := MaxResultsByPath
	if in.maxResults != nil {
		n = *in.maxResults
	}
	if s.short {
		// Best effort: an empty page, then one of one parameter.
		if page.empty = !page.empty; page.empty {
			n = 0
		} else {
			n = 1
		}
	}
	end := min(page.offset+n, len(under))
	found := []*parameter{}
	for _, name := range under[page.offset:end] {
		p, _ := s.find(lookup{names: []string{name}}, region, decrypt)
		found = append(found, p)
	}
	out := map[string]any{"Parameters": found}
	if end < len(under) {
		page.offset = end
		out["NextToken"] = page.String()
	}
	writeJSON(w, http.StatusOK, out)
}

// cursor is where a GetParametersByPath listing stands: its NextToken,
// which holds the request it continues.
type cursor struct {
	path      string
	recursive bool
	offset    int
	empty     bool // the last page was an empty one of SetShortPages
}

func (c cursor) String() string {
	return base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "%s\x00%t\x00%d\x00%t", c.path, c.recursive, c.offset, c.empty))
}

func parseCursor(token string) (cursor, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(token)
	parts := strings.Split(string(raw), "\x00")
	if err != nil || len(parts) != 4 {
		return cursor{}, false
	}
	offset, err := strconv.Atoi(parts[2])
	recursive, err2 := strconv.ParseBool(parts[1])
	empty, err3 := strconv.ParseBool(parts[3])
	if err != nil || err2 != nil || err3 != nil || offset < 0 {
		return cursor{}, false
	}
	return cursor{path: parts[0], recursive: recursive, offset: offset, empty: empty}, true
}

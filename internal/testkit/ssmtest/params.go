package ssmtest

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/lambda-agent/lambda-agent/internal/testkit/awstest"
)

// prefixMessage is SSM's answer to a malformed parameter name, whatever is
// wrong with it.
const prefixMessage = `Parameter name: can't be prefixed with "ssm" (case-insensitive). If formed as a path, it can consist of sub-paths divided by slash symbol; each sub-path can be formed as a mix of letters, numbers and the following 3 symbols .-_`

// validName checks a parameter name, without ARN or selector, as SSM does.
func validName(name string) *awstest.Error {
	if name == "" || strings.ContainsFunc(name, func(r rune) bool {
		return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || strings.ContainsRune("._-/", r))
	}) {
		return validationError(prefixMessage)
	}
	if rest, ok := strings.CutPrefix(name, "/"); ok {
		if slices.Contains(strings.Split(rest, "/"), "") {
			return validationError(prefixMessage)
		}
		return nil
	}
	if strings.Contains(name, "/") {
		return validationError("Parameter name must be a fully qualified name.")
	}
	if lower := strings.ToLower(name); strings.HasPrefix(lower, "aws") || strings.HasPrefix(lower, "ssm") {
		return validationError(prefixMessage)
	}
	return nil
}

// lookup is what a request's Name asks for.
type lookup struct {
	// names are the stored names that may hold it, in order: one, or two
	// for an ARN, whose "parameter/x" stands for both x and /x.
	names    []string
	selector string // after the colon, or ""
}

// parseName resolves a request's Name: a name or an ARN, with an optional
// :version or :label selector.
func parseName(raw string) (lookup, *awstest.Error) {
	n := strings.TrimSpace(raw) // SSM drops spaces around a name
	fromARN := false
	if rest, ok := strings.CutPrefix(n, "arn:"); ok {
		// arn:PARTITION:ssm:REGION:ACCOUNT:parameter/NAME[:SELECTOR]
		parts := strings.SplitN(rest, ":", 5)
		if len(parts) != 5 || !strings.HasPrefix(parts[0], "aws") || parts[1] != "ssm" || !strings.HasPrefix(parts[4], "parameter/") {
			return lookup{}, validationError(prefixMessage)
		}
		if parts[3] != AccountID {
			return lookup{}, errNotFound // not shared with this account
		}
		n = strings.TrimPrefix(parts[4], "parameter")
		fromARN = true
	}
	name, selector, hasSelector := strings.Cut(n, ":")
	if aerr := validName(name); aerr != nil {
		return lookup{}, aerr
	}
	if hasSelector && (selector == "" || strings.ContainsFunc(selector, func(r rune) bool {
		return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || strings.ContainsRune("._-", r))
	})) {
		return lookup{}, validationError(prefixMessage)
	}
	l := lookup{names: []string{name}, selector: selector}
	if fromARN && strings.Count(name, "/") == 1 {
		l.names = append(l.names, strings.TrimPrefix(name, "/"))
	}
	return l, nil
}

// parameter is a Parameter as SSM's API returns it.
type parameter struct {
	ARN              string
	DataType         string
	LastModifiedDate float64 // seconds since the epoch
	Name             string
	Selector         string `json:",omitempty"`
	Type             string
	Value            string
	Version          int
}

// find returns the parameter l asks for, signed in region. The caller holds
// s.mu.
func (s *Server) find(l lookup, region string, decrypt bool) (*parameter, *awstest.Error) {
	var name string
	var versions []version
	for _, n := range l.names {
		if v := s.params[n]; v != nil {
			name, versions = n, v
			break
		}
	}
	if versions == nil {
		return nil, errNotFound
	}
	number := len(versions)
	if l.selector != "" {
		v, err := strconv.Atoi(l.selector)
		if err != nil {
			return nil, errNotFound // a label: none exist here
		}
		if v < 1 || v > len(versions) {
			return nil, &awstest.Error{Status: http.StatusBadRequest, Code: "ParameterVersionNotFound",
				MessageKey: "message", Message: "Systems Manager could not find version " + l.selector + " of " + name + ". Verify the version and try again."}
		}
		number = v
	}
	ver := versions[number-1]
	p := &parameter{
		ARN:              "arn:aws:ssm:" + region + ":" + AccountID + ":parameter/" + strings.TrimPrefix(name, "/"),
		DataType:         "text",
		LastModifiedDate: float64(ver.modified.UnixMilli()) / 1000,
		Name:             name,
		Type:             "String",
		Value:            ver.value,
		Version:          number,
	}
	if l.selector != "" {
		p.Selector = ":" + l.selector
	}
	if ver.secure {
		p.Type = "SecureString"
		if !decrypt {
			p.Value = ciphertext(name, number, ver.value)
		}
	}
	return p, nil
}

// ciphertext stands in for the KMS ciphertext of a SecureString: a blob
// that begins as KMS ciphertexts do and does not contain the value.
func ciphertext(name string, version int, value string) string {
	sum := sha256.Sum256([]byte(name + "\x00" + strconv.Itoa(version) + "\x00" + value))
	return base64.StdEncoding.EncodeToString(append([]byte{0x01, 0x02, 0x02, 0x00, 0x78}, sum[:]...))
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Amzn-Requestid", awstest.NewRequestID())
	region, aerr := awstest.SignedRegion(r, "ssm")
	if aerr != nil {
		aerr.WriteJSON11(w)
		return
	}
	op, _ := strings.CutPrefix(r.Header.Get("X-Amz-Target"), "AmazonSSM.")
	if r.Method != http.MethodPost || (op != "GetParameter" && op != "GetParameters" && op != "GetParametersByPath") {
		unknown := &awstest.Error{Status: http.StatusBadRequest, Code: "com.amazon.coral.service#UnknownOperationException"}
		unknown.WriteJSON11(w)
		return
	}
	var in struct {
		Name           *string
		Names          []string
		WithDecryption bool
		// GetParametersByPath's
		Path             *string
		Recursive        bool
		MaxResults       *int
		NextToken        *string
		ParameterFilters []json.RawMessage
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		malformed := &awstest.Error{Status: http.StatusBadRequest, Code: "com.amazon.coral.service#SerializationException", MessageKey: "message", Message: err.Error()}
		malformed.WriteJSON11(w)
		return
	}
	names := in.Names
	if op == "GetParameter" && in.Name != nil {
		names = []string{*in.Name}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if op == "GetParametersByPath" {
		s.requests = append(s.requests, Request{Operation: op, WithDecryption: in.WithDecryption,
			Path: deref(in.Path), Recursive: in.Recursive, MaxResults: deref(in.MaxResults), NextToken: deref(in.NextToken)})
		s.getParametersByPath(w, byPath{path: in.Path, recursive: in.Recursive, maxResults: in.MaxResults, token: in.NextToken, filters: len(in.ParameterFilters)}, in.WithDecryption, region)
		return
	}
	s.requests = append(s.requests, Request{Operation: op, Names: names, WithDecryption: in.WithDecryption})
	if op == "GetParameter" {
		s.getParameter(w, in.Name, in.WithDecryption, region)
		return
	}
	s.getParameters(w, in.Names, in.WithDecryption, region)
}

// getParameter answers GetParameter. The caller holds s.mu.
func (s *Server) getParameter(w http.ResponseWriter, name *string, decrypt bool, region string) {
	if name == nil {
		validationError("1 validation error detected: Value null at 'name' failed to satisfy constraint: Member must not be null").WriteJSON11(w)
		return
	}
	if len(*name) > 2048 {
		validationError("1 validation error detected: Value '%s' at 'name' failed to satisfy constraint: Member must have length less than or equal to 2048", *name).WriteJSON11(w)
		return
	}
	l, aerr := parseName(*name)
	if aerr != nil {
		aerr.WriteJSON11(w)
		return
	}
	p, aerr := s.find(l, region, decrypt)
	if aerr != nil {
		aerr.WriteJSON11(w)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"Parameter": p})
}

// getParameters answers GetParameters. The caller holds s.mu.
func (s *Server) getParameters(w http.ResponseWriter, names []string, decrypt bool, region string) {
	if len(names) < 1 || len(names) > 10 {
		validationError("1 validation error detected: Value '%v' at 'names' failed to satisfy constraint: Member must have length less than or equal to 10 and greater than or equal to 1", names).WriteJSON11(w)
		return
	}
	found := []*parameter{}
	invalid := []string{}
	for _, name := range names {
		if len(name) > 2048 {
			validationError("1 validation error detected: Value '%s' at 'names' failed to satisfy constraint: Member must have length less than or equal to 2048", name).WriteJSON11(w)
			return
		}
		l, aerr := parseName(name)
		if aerr == errNotFound {
			invalid = append(invalid, name)
			continue
		}
		if aerr != nil {
			aerr.WriteJSON11(w)
			return
		}
		p, aerr := s.find(l, region, decrypt)
		if aerr != nil {
			invalid = append(invalid, name)
			continue
		}
		found = append(found, p)
	}
	slices.SortFunc(found, func(a, b *parameter) int { return strings.Compare(a.Name, b.Name) })
	writeJSON(w, http.StatusOK, map[string]any{"Parameters": found, "InvalidParameters": invalid})
}

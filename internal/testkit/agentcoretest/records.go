package agentcoretest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/lambda-agent/lambda-agent/internal/testkit/awstest"
)

// Record is a long-term memory record, as a strategy extracts it.
type Record struct {
	// Namespaces are the record's namespaces, such as
	// /users/{actorId}/preferences; at least one.
	Namespaces []string
	// StrategyID is the strategy that extracted it; "" means "semantic".
	StrategyID string
	// Text is the record's content.
	Text string
	// CreatedAt is when it was extracted; zero means now.
	CreatedAt time.Time
	// Content, when set, is the record's content on the wire in place of
	// {"text": Text}, such as a member the SDK's model does not have;
	// Text still decides its relevance.
	Content json.RawMessage
}

type record struct {
	id string
	Record
}

// AddRecord stores r in memoryID as AgentCore's strategies would, some
// time after the events they read, and returns its memoryRecordId. It
// panics on an unknown memory or a record AgentCore could not hold.
func (s *Server) AddRecord(memoryID string, r Record) string {
	if len(r.Namespaces) == 0 || r.Text == "" {
		panic("agentcoretest: add record: a record needs a namespace and text")
	}
	for _, ns := range r.Namespaces {
		if ns == "" || len(ns) > MaxNamespace {
			panic(fmt.Sprintf("agentcoretest: add record: namespace %q", ns))
		}
	}
	if r.StrategyID == "" {
		r.StrategyID = "semantic"
	}
	if r.CreatedAt.IsZero() {
		r.CreatedAt = time.Now()
	}
	r.Namespaces = slices.Clone(r.Namespaces)
	if r.Content != nil && !json.Valid(r.Content) {
		panic("agentcoretest: add record: Content is not JSON")
	}
	r.Content = slices.Clone(r.Content)
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.memories[memoryID]
	if m == nil {
		panic(fmt.Sprintf("agentcoretest: add record: no memory %q", memoryID))
	}
	id := "mem-" + randomHex(18)
	m.records = append(m.records, &record{id: id, Record: r})
	return id
}

// Records returns the records of memoryID, in the order they were added.
func (s *Server) Records(memoryID string) []Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Record
	if m := s.memories[memoryID]; m != nil {
		for _, r := range m.records {
			out = append(out, r.Record)
		}
	}
	return out
}

// summary is a MemoryRecordSummary on the wire.
type summary struct {
	MemoryRecordID   string          `json:"memoryRecordId"`
	Content          json.RawMessage `json:"content"`
	MemoryStrategyID string          `json:"memoryStrategyId"`
	Namespaces       []string        `json:"namespaces"`
	CreatedAt        float64         `json:"createdAt"`
	Score            *float64        `json:"score,omitempty"`
}

func (r *record) summary(score *float64) summary {
	content := r.Content
	if content == nil {
		content, _ = json.Marshal(map[string]string{"text": r.Text}) // a string always encodes
	}
	return summary{MemoryRecordID: r.id, Content: content, MemoryStrategyID: r.StrategyID,
		Namespaces: r.Namespaces, CreatedAt: float64(r.CreatedAt.UnixMilli()) / 1000, Score: score}
}

// scope is the namespace selection of RetrieveMemoryRecords and
// ListMemoryRecords.
type scope struct {
	Namespace     *string `json:"namespace"`
	NamespacePath *string `json:"namespacePath"`
}

func (sc scope) valid() *awstest.Error {
	if sc.Namespace == nil && sc.NamespacePath == nil {
		return invalidField("Either namespace or namespacePath is required")
	}
	for member, v := range map[string]*string{"namespace": sc.Namespace, "namespacePath": sc.NamespacePath} {
		if v != nil {
			if aerr := validID(member, *v, MaxNamespace, nil); aerr != nil {
				return aerr
			}
		}
	}
	return nil
}

// matches says whether a record is in scope: namespace is an exact
// namespace, as the SDK's documentation states it; namespacePath is a
// parent in the hierarchy, whole segments only.
func (sc scope) matches(r *record) bool {
	for _, ns := range r.Namespaces {
		if sc.Namespace != nil && ns != *sc.Namespace {
			continue
		}
		if sc.NamespacePath != nil {
			p := strings.TrimSuffix(*sc.NamespacePath, "/")
			if ns != p && !strings.HasPrefix(ns, p+"/") && p != "" {
				continue
			}
		}
		return true
	}
	return false
}

type retrieveInput struct {
	scope
	MaxResults     *int    `json:"maxResults"`
	NextToken      *string `json:"nextToken"`
	SearchCriteria *struct {
		SearchQuery      *string         `json:"searchQuery"`
		MemoryStrategyID *string         `json:"memoryStrategyId"`
		TopK             *int            `json:"topK"`
		MetadataFilters  json.RawMessage `json:"metadataFilters"`
	} `json:"searchCriteria"`
}

func (s *Server) retrieveRecords(r *http.Request, body []byte) (int, any, *awstest.Error) {
	var in retrieveInput
	if aerr := decode(body, &in); aerr != nil {
		return 0, nil, aerr
	}
	if in.SearchCriteria == nil {
		return 0, nil, required("searchCriteria")
	}
	sc := in.SearchCriteria
	if sc.SearchQuery == nil {
		return 0, nil, required("searchCriteria.searchQuery")
	}
	if aerr := validID("searchCriteria.searchQuery", *sc.SearchQuery, MaxSearchQuery, nil); aerr != nil {
		return 0, nil, aerr
	}
	if sc.MemoryStrategyID != nil {
		if aerr := validID("searchCriteria.memoryStrategyId", *sc.MemoryStrategyID, MaxStrategyID, strategyPattern); aerr != nil {
			return 0, nil, aerr
		}
	}
	topK := DefaultTopK
	if sc.TopK != nil {
		if *sc.TopK < 1 || *sc.TopK > MaxTopK {
			return 0, nil, invalidField("1 validation error detected: Value '%d' at 'searchCriteria.topK' failed to satisfy constraint: Member must have value between 1 and %d", *sc.TopK, MaxTopK)
		}
		topK = *sc.TopK
	}
	if len(sc.MetadataFilters) > 0 && string(sc.MetadataFilters) != "null" {
		return 0, nil, invalidField("agentcoretest: metadataFilters are not modeled")
	}
	if aerr := in.scope.valid(); aerr != nil {
		return 0, nil, aerr
	}
	size, aerr := pageSize(in.MaxResults)
	if aerr != nil {
		return 0, nil, aerr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m, aerr := s.memoryLocked(r)
	if aerr != nil {
		return 0, nil, aerr
	}
	request, _ := canonicalWithout(body, "nextToken", "maxResults")
	offset, aerr := s.resume(in.NextToken, "RetrieveMemoryRecords", r.URL.Path+request)
	if aerr != nil {
		return 0, nil, aerr
	}
	query := words(*sc.SearchQuery)
	type hit struct {
		r     *record
		score float64
	}
	var hits []hit
	for _, rec := range m.records {
		if !in.scope.matches(rec) || (sc.MemoryStrategyID != nil && rec.StrategyID != *sc.MemoryStrategyID) {
			continue
		}
		if score := overlap(query, words(rec.Text)); score > 0 {
			hits = append(hits, hit{rec, score})
		}
	}
	slices.SortStableFunc(hits, func(a, b hit) int {
		switch {
		case a.score != b.score:
			if a.score > b.score {
				return -1
			}
			return 1
		case !a.r.CreatedAt.Equal(b.r.CreatedAt):
			return b.r.CreatedAt.Compare(a.r.CreatedAt)
		}
		return strings.Compare(a.r.id, b.r.id)
	})
	hits = hits[:min(len(hits), topK)]
	out := recordsPage{MemoryRecordSummaries: []summary{}}
	hits, out.NextToken = pageOf(s, hits, offset, size, "RetrieveMemoryRecords", r.URL.Path+request)
	for _, h := range hits {
		out.MemoryRecordSummaries = append(out.MemoryRecordSummaries, h.r.summary(&h.score))
	}
	return http.StatusOK, out, nil
}

type recordsPage struct {
	MemoryRecordSummaries []summary `json:"memoryRecordSummaries"`
	NextToken             *string   `json:"nextToken,omitempty"`
}

// canonicalWithout is body without the given members, in one spelling.
func canonicalWithout(body []byte, members ...string) (string, *awstest.Error) {
	var v map[string]any
	if aerr := decode(body, &v); aerr != nil {
		return "", aerr
	}
	for _, k := range members {
		delete(v, k)
	}
	b, _ := json.Marshal(v) // decoded JSON always encodes
	return string(b), nil
}

// words is the set of lower-case words (runs of letters and digits) of s.
func words(s string) map[string]bool {
	out := map[string]bool{}
	for _, w := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	}) {
		out[w] = true
	}
	return out
}

// overlap is the share of the query's words that the text has: the
// stand-in's relevance score, in [0, 1]. AgentCore ranks by semantic
// similarity; this is deterministic instead.
func overlap(query, text map[string]bool) float64 {
	if len(query) == 0 {
		return 0
	}
	n := 0
	for w := range query {
		if text[w] {
			n++
		}
	}
	return float64(n) / float64(len(query))
}

type listRecordsInput struct {
	scope
	MemoryStrategyID *string         `json:"memoryStrategyId"`
	MaxResults       *int            `json:"maxResults"`
	NextToken        *string         `json:"nextToken"`
	MetadataFilters  json.RawMessage `json:"metadataFilters"`
}

func (s *Server) listRecords(r *http.Request, body []byte) (int, any, *awstest.Error) {
	var in listRecordsInput
	if aerr := decode(body, &in); aerr != nil {
		return 0, nil, aerr
	}
	if aerr := in.scope.valid(); aerr != nil {
		return 0, nil, aerr
	}
	if in.MemoryStrategyID != nil {
		if aerr := validID("memoryStrategyId", *in.MemoryStrategyID, MaxStrategyID, strategyPattern); aerr != nil {
			return 0, nil, aerr
		}
	}
	if len(in.MetadataFilters) > 0 && string(in.MetadataFilters) != "null" {
		return 0, nil, invalidField("agentcoretest: metadataFilters are not modeled")
	}
	size, aerr := pageSize(in.MaxResults)
	if aerr != nil {
		return 0, nil, aerr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m, aerr := s.memoryLocked(r)
	if aerr != nil {
		return 0, nil, aerr
	}
	request, _ := canonicalWithout(body, "nextToken", "maxResults")
	offset, aerr := s.resume(in.NextToken, "ListMemoryRecords", r.URL.Path+request)
	if aerr != nil {
		return 0, nil, aerr
	}
	var matched []*record
	for _, rec := range m.records {
		if in.scope.matches(rec) && (in.MemoryStrategyID == nil || rec.StrategyID == *in.MemoryStrategyID) {
			matched = append(matched, rec)
		}
	}
	out := recordsPage{MemoryRecordSummaries: []summary{}}
	matched, out.NextToken = pageOf(s, matched, offset, size, "ListMemoryRecords", r.URL.Path+request)
	for _, rec := range matched {
		out.MemoryRecordSummaries = append(out.MemoryRecordSummaries, rec.summary(nil))
	}
	return http.StatusOK, out, nil
}

func (s *Server) getRecord(r *http.Request, _ []byte) (int, any, *awstest.Error) {
	id := r.PathValue("memoryRecordId")
	s.mu.Lock()
	defer s.mu.Unlock()
	m, aerr := s.memoryLocked(r)
	if aerr != nil {
		return 0, nil, aerr
	}
	i := slices.IndexFunc(m.records, func(r *record) bool { return r.id == id })
	if i < 0 {
		return 0, nil, notFound("Memory record %s not found", id)
	}
	return http.StatusOK, struct {
		MemoryRecord summary `json:"memoryRecord"`
	}{m.records[i].summary(nil)}, nil
}

type recordOutput struct {
	MemoryRecordID string  `json:"memoryRecordId"`
	Status         string  `json:"status"`
	ErrorCode      *int    `json:"errorCode,omitempty"`
	ErrorMessage   *string `json:"errorMessage,omitempty"`
}

func (s *Server) batchDeleteRecords(r *http.Request, body []byte) (int, any, *awstest.Error) {
	var in struct {
		Records []struct {
			MemoryRecordID *string `json:"memoryRecordId"`
			Namespace      *string `json:"namespace"`
		} `json:"records"`
	}
	if aerr := decode(body, &in); aerr != nil {
		return 0, nil, aerr
	}
	if in.Records == nil {
		return 0, nil, required("records")
	}
	for i, rec := range in.Records {
		if rec.MemoryRecordID == nil {
			return 0, nil, required(fmt.Sprintf("records.%d.member.memoryRecordId", i+1))
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m, aerr := s.memoryLocked(r)
	if aerr != nil {
		return 0, nil, aerr
	}
	out := struct {
		SuccessfulRecords []recordOutput `json:"successfulRecords"`
		FailedRecords     []recordOutput `json:"failedRecords"`
	}{[]recordOutput{}, []recordOutput{}}
	for _, in := range in.Records {
		id := *in.MemoryRecordID
		i := slices.IndexFunc(m.records, func(r *record) bool { return r.id == id })
		if i < 0 {
			code, msg := http.StatusNotFound, "Memory record not found"
			out.FailedRecords = append(out.FailedRecords, recordOutput{MemoryRecordID: id, Status: "FAILED", ErrorCode: &code, ErrorMessage: &msg})
			continue
		}
		m.records = slices.Delete(m.records, i, i+1)
		out.SuccessfulRecords = append(out.SuccessfulRecords, recordOutput{MemoryRecordID: id, Status: "SUCCEEDED"})
	}
	return http.StatusOK, out, nil
}

package memory

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"unicode"
)

// Relevance is lexical: BM25 over the words of a query and of each record,
// which the recall reads anyway. It needs no model call, so a turn's recall
// costs one Query and no more, and it works as well in the local run as
// deployed. docs/memory.md gives its measurements beside embeddings'.

// words returns the terms of text: lower-cased runs of letters and digits,
// without common function words, with a plural's s taken off.
func words(text string) []string {
	fields := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	out := fields[:0]
	for _, f := range fields {
		if stopWords[f] || len(f) < 2 {
			continue
		}
		out = append(out, stem(f))
	}
	return out
}

// stem strips the endings that most often keep a question's word from a
// fact's: plurals, "-ing", "-ed".
func stem(w string) string {
	switch {
	case len(w) <= 4:
		return w
	case strings.HasSuffix(w, "ies"):
		return w[:len(w)-3] + "y"
	case strings.HasSuffix(w, "ing") && len(w) > 5:
		return w[:len(w)-3]
	case strings.HasSuffix(w, "ed") && len(w) > 5:
		return w[:len(w)-2]
	case strings.HasSuffix(w, "sses"), strings.HasSuffix(w, "xes"), strings.HasSuffix(w, "ches"), strings.HasSuffix(w, "shes"):
		return w[:len(w)-2]
	case strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss"):
		return w[:len(w)-1]
	}
	return w
}

var stopWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a an the and or but if of to in on at by for with about as into from
		is are was were be been being am do does did have has had i me my mine we our you your he she it its
		they them their this that these those what which who whom whose when where why how can could would
		should will shall may might must not no yes so than then there here just also very too please tell
		know remember recall any some all more most other such only own same s t don now person`) {
		m[w] = true
	}
	return m
}()

// scored is a record with its relevance to a query.
type scored struct {
	Record
	score float64
}

// rank scores records against query by BM25, best first, and leaves out
// those that share no term with it.
func rank(records []Record, query string) []scored {
	terms := words(query)
	if len(terms) == 0 || len(records) == 0 {
		return nil
	}
	const k1, b = 1.2, 0.75
	docs := make([][]string, len(records))
	df := map[string]int{}
	total := 0
	for i, r := range records {
		docs[i] = words(r.Kind + " " + r.Text)
		total += len(docs[i])
		seen := map[string]bool{}
		for _, w := range docs[i] {
			if !seen[w] {
				seen[w] = true
				df[w]++
			}
		}
	}
	avg := math.Max(float64(total)/float64(len(records)), 1)
	n := float64(len(records))
	var out []scored
	for i, doc := range docs {
		tf := map[string]int{}
		for _, w := range doc {
			tf[w]++
		}
		score := 0.0
		for _, t := range uniq(terms) {
			f := float64(tf[t])
			if f == 0 {
				continue
			}
			idf := math.Log(1 + (n-float64(df[t])+0.5)/(float64(df[t])+0.5))
			score += idf * f * (k1 + 1) / (f + k1*(1-b+b*float64(len(doc))/avg))
		}
		if score > 0 {
			out = append(out, scored{records[i], score})
		}
	}
	slices.SortStableFunc(out, func(x, y scored) int {
		return cmp.Or(cmp.Compare(y.score, x.score), y.UpdatedAt.Compare(x.UpdatedAt))
	})
	return out
}

func uniq(ws []string) []string {
	s := slices.Clone(ws)
	slices.Sort(s)
	return slices.Compact(s)
}

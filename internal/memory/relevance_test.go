package memory

import (
	"fmt"
	"testing"
	"time"
)

// corpus is a person's memory as extraction writes it: short third-person
// records, of the default kinds.
var corpus = []Record{
	{ID: "c01", Kind: "fact", Text: "The person's favourite colour is teal."},
	{ID: "c02", Kind: "fact", Text: "The person lives in Lyon, France."},
	{ID: "c03", Kind: "fact", Text: "The person works as a nurse at the Édouard Herriot hospital."},
	{ID: "c04", Kind: "fact", Text: "The person has a dog named Biscuit, a beagle."},
	{ID: "c05", Kind: "fact", Text: "The person's daughter Mia is seven years old."},
	{ID: "c06", Kind: "fact", Text: "The person is allergic to peanuts."},
	{ID: "c07", Kind: "fact", Text: "The person drives a green Volvo estate."},
	{ID: "c08", Kind: "fact", Text: "The person's birthday is on 14 March."},
	{ID: "c09", Kind: "fact", Text: "The person is learning Japanese, at beginner level."},
	{ID: "c10", Kind: "fact", Text: "The person runs the Go backend of a travel booking startup."},
	{ID: "c11", Kind: "fact", Text: "The person's team deploys with AWS SAM to eu-west-1."},
	{ID: "c12", Kind: "fact", Text: "The person's partner is called Sam and is a teacher."},
	{ID: "c13", Kind: "fact", Text: "The person plays chess online most evenings."},
	{ID: "c14", Kind: "fact", Text: "The person is training for the Lyon half marathon in October."},
	{ID: "c15", Kind: "fact", Text: "The person's laptop is a 2021 MacBook Pro."},
	{ID: "c16", Kind: "preference", Text: "The person prefers short answers with code examples."},
	{ID: "c17", Kind: "preference", Text: "The person wants answers in British English."},
	{ID: "c18", Kind: "preference", Text: "The person dislikes coriander."},
	{ID: "c19", Kind: "preference", Text: "The person likes jazz, especially Bill Evans."},
	{ID: "c20", Kind: "preference", Text: "The person prefers trains to flights for trips in Europe."},
	{ID: "c21", Kind: "preference", Text: "The person prefers PostgreSQL over MySQL."},
	{ID: "c22", Kind: "summary", Text: "The person decided to move the sessions table to on-demand capacity."},
	{ID: "c23", Kind: "summary", Text: "The person chose Bedrock's Claude model for the support agent."},
	{ID: "c24", Kind: "summary", Text: "The person booked a holiday in Porto for the first week of August."},
	{ID: "c25", Kind: "summary", Text: "The person concluded that the cold start budget is 200 ms."},
	{ID: "c26", Kind: "fact", Text: "The person's mother lives in Marseille."},
	{ID: "c27", Kind: "fact", Text: "The person speaks French and English."},
	{ID: "c28", Kind: "fact", Text: "The person's flat has a small balcony with tomato plants."},
	{ID: "c29", Kind: "summary", Text: "The person agreed to review the pull request on retries by Friday."},
	{ID: "c30", Kind: "fact", Text: "The person's bike was stolen last spring."},
}

// questions are what a person asks in a later session, each with the
// record that answers it: some share words with it, some only meaning.
var questions = []struct {
	q, want string
	lexical bool // shares a content word with the record
}{
	{"What is my favourite colour?", "c01", true},
	{"Which city do I live in?", "c02", true},
	{"Where do I work?", "c03", true},
	{"What's my dog called?", "c04", true},
	{"How old is Mia?", "c05", true},
	{"Can I eat this satay sauce with peanuts?", "c06", true},
	{"What car do I drive?", "c07", true},
	{"When is my birthday?", "c08", true},
	{"Suggest some Japanese practice for me.", "c09", true},
	{"Which deployment tool does my team use?", "c11", true},
	{"What does my partner do?", "c12", true},
	{"Any chess openings to try tonight?", "c13", true},
	{"Plan my marathon training this week.", "c14", true},
	{"Recommend some jazz records.", "c19", true},
	{"Which database should we use?", "c21", false},
	{"What did we decide about the sessions table?", "c22", true},
	{"Where am I going on holiday?", "c24", true},
	{"What is our cold start budget?", "c25", true},
	{"When should I review the retries PR?", "c29", true},
	{"Where does my mum live?", "c26", false},
	{"Which languages do I know?", "c27", false},
	{"What can I grow outside?", "c28", false},
	{"What nuts should I avoid?", "c06", false},
	{"What's a good recipe without herbs I hate?", "c18", false},
	{"How should I get to Berlin?", "c20", false},
	{"Which machine am I coding on?", "c15", false},
	{"What is my job?", "c03", false},
	{"Which LLM did we pick?", "c23", false},
}

// TestRelevance measures lexical recall on the corpus: for how many
// questions the record that answers it is ranked first, or in the first
// three. docs/memory.md reports these figures; run with -v to see them.
func TestRelevance(t *testing.T) {
	for i := range corpus {
		corpus[i].UpdatedAt = time.Date(2026, 1, 1, 0, 0, i, 0, time.UTC)
		corpus[i].always = corpus[i].Kind == "preference" // as DefaultKinds say
	}
	var at1, at3, lexAt3, lexN, semAt3, semN, given int
	for _, q := range questions {
		ranked := rank(corpus, q.q)
		pos := -1
		for i, sc := range ranked {
			if sc.ID == q.want {
				pos = i
				break
			}
		}
		hit3 := pos >= 0 && pos < 3
		for _, r := range choose(corpus, q.q, DefaultRecallBytes) {
			if r.ID == q.want {
				given++
			}
		}
		if pos == 0 {
			at1++
		}
		if hit3 {
			at3++
		}
		if q.lexical {
			lexN++
			if hit3 {
				lexAt3++
			}
		} else {
			semN++
			if hit3 {
				semAt3++
			}
			continue
		}
		if !hit3 {
			t.Errorf("%q shares words with %s, which is at %d", q.q, q.want, pos)
		}
	}
	pct := func(a, b int) string { return fmt.Sprintf("%d/%d (%.0f%%)", a, b, 100*float64(a)/float64(b)) }
	t.Logf("lexical recall@1 %s, recall@3 %s; questions that share a word with the answer: recall@3 %s; questions that share only meaning: recall@3 %s; "+
		"the answer is among what the turn is given (the ranked records and the preferences, within %d bytes): %s",
		pct(at1, len(questions)), pct(at3, len(questions)), pct(lexAt3, lexN), pct(semAt3, semN), DefaultRecallBytes, pct(given, len(questions)))
}

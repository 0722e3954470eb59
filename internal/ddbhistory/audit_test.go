package ddbhistory_test

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"testing"
	"time"

	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
)

// TestAuditPagePastARecordInParts: a page whose budget leaves out a record
// stored in parts, larger than one item, goes on past its parts to the
// records after it, in every backend, and so does a page of one record at
// a time; without a budget the record comes whole.
func TestAuditPagePastARecordInParts(t *testing.T) {
	runBackends(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, ddbhistory.Config{})
		sess := ddbhistory.NewSession(alice)
		for i := range 3 {
			if err := e.store.Commit(t.Context(), sess, ddbhistory.Turn{Messages: turn(i)}); err != nil {
				t.Fatal(err)
			}
		}
		raw := make([]byte, 900<<10)
		_, _ = rand.Read(raw)
		big := []byte(`{"big":"` + base64.StdEncoding.EncodeToString(raw) + `"}`) // 1.2 MB, three items compressed
		records := [][]byte{[]byte(`{"call":"before"}`), big, []byte(`{"call":"after"}`)}
		for i, r := range records {
			turnID := ddbhistory.NewAuditTurn(e.now.Now().Add(time.Duration(i) * time.Millisecond))
			if _, err := e.store.PutAudit(t.Context(), sess, turnID, ddbhistory.AuditTurn{At: 2 * i, Committed: sess.Version, Records: [][]byte{r}}, time.Hour); err != nil {
				t.Fatal(err)
			}
		}
		// shown is a page's records: each one's JSON, or "-" for one
		// listed without it.
		shown := func(p *ddbhistory.AuditPage) []string {
			var out []string
			for _, r := range p.Records {
				switch {
				case r.JSON == nil:
					out = append(out, fmt.Sprintf("- (%d bytes)", r.Size))
				case len(r.JSON) > 100:
					out = append(out, fmt.Sprintf("whole (%d bytes)", len(r.JSON)))
				default:
					out = append(out, string(r.JSON))
				}
			}
			return out
		}
		want := fmt.Sprintf("[%s - (%d bytes) %s]", records[0], len(big), records[2])
		page, err := e.store.Audit(t.Context(), alice, "", 20, 100<<10)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(shown(page)); got != want || page.NextCursor != "" {
			t.Errorf("a page of 100 KB: %s, next %q; want %s in one page", got, page.NextCursor, want)
		}
		var paged []string
		pages := 0
		for cursor := ""; ; {
			p, err := e.store.Audit(t.Context(), alice, cursor, 1, 100<<10)
			if err != nil {
				t.Fatal(err)
			}
			pages++
			paged = append(paged, shown(p)...)
			if cursor = p.NextCursor; cursor == "" || pages > 5 {
				break
			}
		}
		if got := fmt.Sprint(paged); got != want {
			t.Errorf("pages of one record: %s; want %s", got, want)
		}
		whole, err := e.store.Audit(t.Context(), alice, "", 20, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := fmt.Sprint(shown(whole)), fmt.Sprintf("[%s whole (%d bytes) %s]", records[0], len(big), records[2]); got != want {
			t.Errorf("a page without a budget: %s; want %s", got, want)
		}
	})
}

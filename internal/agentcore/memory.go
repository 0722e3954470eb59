package agentcore

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockagentcore"
	"github.com/aws/aws-sdk-go-v2/service/bedrockagentcore/types"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/memory"
	"github.com/lambda-agent/lambda-agent/internal/turn"
)

// Memory is an AgentCore Memory resource as owners' long-term memory: it
// recalls their records into their turns (a turn.Provider), and serves the
// memory routes (internal/httpapi's Memory). It is safe for concurrent
// use.
type Memory struct {
	client API
	owners Owners
	cfg    Config
	// Logger gets a line for each recall that failed; nil means
	// slog.Default().
	Logger *slog.Logger
}

var (
	_ turn.Provider   = (*Memory)(nil)
	_ memory.Searcher = (*Memory)(nil)
)

// New returns the Memory of cfg.MemoryID, for the owners that owners says
// have memory.
func New(client API, owners Owners, cfg Config) (*Memory, error) {
	if err := cfg.check(); err != nil {
		return nil, fmt.Errorf("agentcore: %w", err)
	}
	return &Memory{client: client, owners: owners, cfg: cfg}, nil
}

// Has reports whether owner has memory.
func (m *Memory) Has(owner string) bool { return m.owners.Has(owner) }

// maxRecordBytes bounds a recalled record's text: a strategy's record is
// the service's, but its words are the conversation's.
const maxRecordBytes = 1000

// Provide recalls the owner's records that are relevant to the turn's
// input with one RetrieveMemoryRecords call, into the place in the prompt
// the built-in memory fills, within Config.RecallBytes and the turn's
// room. Memory is an aid: a recall that fails or takes longer than
// Config.RecallTimeout gives the turn no memory rather than fail it.
func (m *Memory) Provide(ctx context.Context, pv turn.Provision) ([]agent.ContextEntry, error) {
	query := memory.Query(pv)
	if !m.Has(pv.Owner) || strings.TrimSpace(query) == "" {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, m.cfg.RecallTimeout)
	defer cancel()
	found, err := m.SearchRecalled(ctx, pv.Owner, query, m.cfg.TopK)
	if err != nil {
		cmp.Or(m.Logger, slog.Default()).WarnContext(ctx, "agentcore: recall failed; the turn goes on without memory",
			"memory_id", m.cfg.MemoryID, "error", err.Error())
		return nil, nil
	}
	return memory.Entry(memory.Within(found, m.cfg.RecallBytes), pv.Room), nil
}

// SearchRecalled returns up to n of owner's records relevant to query, most
// relevant first, with one RetrieveMemoryRecords call under the owner's
// namespace path, each record's text clipped: search_memory's search
// (memory.SearchTool), and recall's.
func (m *Memory) SearchRecalled(ctx context.Context, owner, query string, n int) ([]memory.Recalled, error) {
	if !m.Has(owner) {
		return nil, nil
	}
	q := []rune(strings.TrimSpace(query))
	if len(q) == 0 {
		return nil, nil
	}
	out, err := m.client.RetrieveMemoryRecords(ctx, &bedrockagentcore.RetrieveMemoryRecordsInput{
		MemoryId:      aws.String(m.cfg.MemoryID),
		NamespacePath: aws.String(m.cfg.NamespacePath(owner)),
		SearchCriteria: &types.SearchCriteria{
			SearchQuery: aws.String(string(q[:min(len(q), maxSearchQuery)])),
			TopK:        aws.Int32(int32(n)),
		},
		MaxResults: aws.Int32(int32(n)),
	})
	if err != nil {
		return nil, fmt.Errorf("agentcore: retrieve records: %w", err)
	}
	var rs []memory.Recalled
	for _, s := range out.MemoryRecordSummaries {
		if r, ok := recordOf(s.MemoryRecordId, s.MemoryStrategyId, s.Content, s.CreatedAt); ok && m.owns(owner, s.Namespaces) {
			rs = append(rs, memory.Recalled{Kind: r.Kind, Text: agent.Clip(r.Text, maxRecordBytes), Learned: r.UpdatedAt.Format(time.DateOnly)})
		}
	}
	return rs, nil
}

// Committed does nothing: the memory function mirrors commits from the
// table's stream (Mirror).
func (m *Memory) Committed(context.Context, turn.Committed) {}

// recordOf reads a memory record of AgentCore as one of ours: its strategy
// is its kind. ok is false for a record without text.
func recordOf(id, strategy *string, content types.MemoryContent, created *time.Time) (memory.Record, bool) {
	text, ok := content.(*types.MemoryContentMemberText)
	if !ok || text.Value == "" || id == nil {
		return memory.Record{}, false
	}
	return memory.Record{ID: *id, Kind: aws.ToString(strategy), Text: text.Value, UpdatedAt: aws.ToTime(created).UTC()}, true
}

// maxCursor bounds a cursor: AgentCore's nextToken, base64url-encoded.
const maxCursor = 4096

// List returns a page of owner's records, limit at a time: those under
// the owner's namespace path, in AgentCore's order. cursor is "" for the
// first page and a Page's NextCursor for the next.
func (m *Memory) List(ctx context.Context, owner, cursor string, limit int) (*memory.Page, error) {
	page := &memory.Page{Records: []memory.Record{}}
	if limit < 1 || limit > memory.MaxPageSize {
		return nil, fmt.Errorf("%w: limit must be between 1 and %d", memory.ErrInvalid, memory.MaxPageSize)
	}
	token, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil || len(cursor) > maxCursor {
		return nil, fmt.Errorf("%w: malformed cursor", memory.ErrInvalid)
	}
	if !m.Has(owner) {
		return page, nil
	}
	in := &bedrockagentcore.ListMemoryRecordsInput{
		MemoryId:      aws.String(m.cfg.MemoryID),
		NamespacePath: aws.String(m.cfg.NamespacePath(owner)),
		MaxResults:    aws.Int32(int32(limit)),
	}
	if cursor != "" {
		in.NextToken = aws.String(string(token))
	}
	out, err := m.client.ListMemoryRecords(ctx, in)
	var invalid *types.ValidationException
	if errors.As(err, &invalid) && cursor != "" {
		return nil, fmt.Errorf("%w: the cursor is not one of this list's", memory.ErrInvalid)
	}
	if err != nil {
		return nil, fmt.Errorf("agentcore: list records: %w", err)
	}
	for _, s := range out.MemoryRecordSummaries {
		if r, ok := recordOf(s.MemoryRecordId, s.MemoryStrategyId, s.Content, s.CreatedAt); ok {
			page.Records = append(page.Records, r)
		}
	}
	if t := aws.ToString(out.NextToken); t != "" {
		page.NextCursor = base64.RawURLEncoding.EncodeToString([]byte(t))
	}
	return page, nil
}

// recordIDPattern is what a record id may be before it is sent in a
// path: anything else is no record of the owner's.
var recordIDPattern = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9-_]*$`)

// Delete deletes one of owner's records. A record that is not under the
// owner's namespace path is memory.ErrNotFound, whoever's it is.
func (m *Memory) Delete(ctx context.Context, owner, id string) error {
	if !m.Has(owner) || len(id) > 128 || !recordIDPattern.MatchString(id) {
		return memory.ErrNotFound
	}
	got, err := m.client.GetMemoryRecord(ctx, &bedrockagentcore.GetMemoryRecordInput{
		MemoryId: aws.String(m.cfg.MemoryID), MemoryRecordId: aws.String(id)})
	var nf *types.ResourceNotFoundException
	if errors.As(err, &nf) {
		return memory.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("agentcore: get record: %w", err)
	}
	if !m.owns(owner, got.MemoryRecord.Namespaces) {
		return memory.ErrNotFound
	}
	gone, err := m.deleteRecords(ctx, []string{id})
	if err != nil {
		return err
	}
	if gone == 0 {
		return memory.ErrNotFound // deleted since
	}
	return nil
}

// owns says whether a record of namespaces is owner's.
func (m *Memory) owns(owner string, namespaces []string) bool {
	path := m.cfg.NamespacePath(owner)
	for _, ns := range namespaces {
		if under(ns, path) {
			return true
		}
	}
	return false
}

// deleteRecords deletes the records of ids, at most a page of them, and
// returns how many it deleted. A record gone already is no failure.
func (m *Memory) deleteRecords(ctx context.Context, ids []string) (int, error) {
	in := &bedrockagentcore.BatchDeleteMemoryRecordsInput{MemoryId: aws.String(m.cfg.MemoryID)}
	for _, id := range ids {
		in.Records = append(in.Records, types.MemoryRecordDeleteInput{MemoryRecordId: aws.String(id)})
	}
	out, err := m.client.BatchDeleteMemoryRecords(ctx, in)
	if err != nil {
		return 0, fmt.Errorf("agentcore: delete records: %w", err)
	}
	for _, f := range out.FailedRecords {
		if aws.ToInt32(f.ErrorCode) != 404 {
			return 0, fmt.Errorf("agentcore: delete record %s: %d %s", aws.ToString(f.MemoryRecordId), aws.ToInt32(f.ErrorCode), aws.ToString(f.ErrorMessage))
		}
	}
	return len(out.SuccessfulRecords), nil
}

// Forget marks a forget-all of owner's memory. The memory function deletes
// the owner's records in AgentCore when its stream record of the mark
// arrives (Mirror): that work is unbounded, so it is not the request's.
func (m *Memory) Forget(ctx context.Context, owner string) error {
	if !m.Has(owner) {
		return nil
	}
	_, err := m.owners.MarkForgotten(ctx, owner)
	return err
}

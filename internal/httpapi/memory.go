package httpapi

import (
	"context"
	"net/http"

	"github.com/lambda-agent/lambda-agent/internal/memory"
)

// Memory is the long-term memory that the memory routes read and change:
// internal/memory's Store.
type Memory interface {
	Has(owner string) bool
	List(ctx context.Context, owner, cursor string, limit int) (*memory.Page, error)
	Delete(ctx context.Context, owner, id string) error
	Forget(ctx context.Context, owner string) error
}

var _ Memory = (*memory.Store)(nil)

// The memory routes. They serve where the session routes do, with the
// same owners.
const (
	RouteListMemory   = "GET /memory"
	RouteExportMemory = "GET /memory/export"
	RouteDeleteRecord = "DELETE /memory/{recordId}"
	RouteForget       = "DELETE /memory"
)

// Pages of the memory routes.
const (
	DefaultMemoryPage = 50
	// MemoryFormat names the format of a memory export.
	MemoryFormat = "lambda-agent.memory/1"
)

// MemoryResponse is the answer to GET /memory: a page of the caller's
// records. Enabled is false when the caller has no memory: the deployment
// keeps none, or the caller is not one person (see docs/memory.md).
type MemoryResponse struct {
	Enabled    bool            `json:"enabled"`
	Records    []memory.Record `json:"records"`
	NextCursor string          `json:"next_cursor,omitempty"`
}

// MemoryExport is a page of GET /memory/export: the caller's records, with
// the format's name. A session's export never holds memory.
type MemoryExport struct {
	Format     string          `json:"format"`
	Records    []memory.Record `json:"records"`
	NextCursor string          `json:"next_cursor,omitempty"`
}

// memoryPage reads the page of the caller's records that the request asks
// for, and whether the caller has memory.
func (h *Handler) memoryPage(r *http.Request, def int) (*memory.Page, bool, error) {
	owner, e := h.owner(r)
	if e != nil {
		return nil, false, e
	}
	limit, e := limitParam(r, def, memory.MaxPageSize)
	if e != nil {
		return nil, false, e
	}
	if h.cfg.Memory == nil {
		return &memory.Page{Records: []memory.Record{}}, false, nil
	}
	page, err := h.cfg.Memory.List(r.Context(), owner, r.URL.Query().Get("cursor"), limit)
	if err != nil {
		return nil, false, err
	}
	return page, h.cfg.Memory.Has(owner), nil
}

func (h *Handler) listMemory(r *http.Request, _ *record) (int, []byte, error) {
	page, has, err := h.memoryPage(r, DefaultMemoryPage)
	if err != nil {
		return 0, nil, err
	}
	return jsonOK(MemoryResponse{Enabled: has, Records: page.Records, NextCursor: page.NextCursor})
}

func (h *Handler) exportMemory(r *http.Request, _ *record) (int, []byte, error) {
	page, _, err := h.memoryPage(r, memory.MaxPageSize)
	if err != nil {
		return 0, nil, err
	}
	return jsonOK(MemoryExport{Format: MemoryFormat, Records: page.Records, NextCursor: page.NextCursor})
}

func (h *Handler) deleteRecord(r *http.Request, _ *record) (int, []byte, error) {
	owner, e := h.owner(r)
	if e != nil {
		return 0, nil, e
	}
	if h.cfg.Memory == nil {
		return 0, nil, memory.ErrNotFound
	}
	if err := h.cfg.Memory.Delete(r.Context(), owner, r.PathValue("recordId")); err != nil {
		return 0, nil, err
	}
	return http.StatusNoContent, nil, nil
}

func (h *Handler) forget(r *http.Request, _ *record) (int, []byte, error) {
	owner, e := h.owner(r)
	if e != nil {
		return 0, nil, e
	}
	if h.cfg.Memory != nil {
		if err := h.cfg.Memory.Forget(r.Context(), owner); err != nil {
			return 0, nil, err
		}
	}
	return http.StatusNoContent, nil, nil
}

package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
)

// State is the agent's key-value store, persisted with the session. Values
// are JSON: they are encoded on the way in and decoded on the way out, so a
// caller never shares memory with the store. A State is safe for concurrent
// use, which matters because tools run concurrently.
type State struct {
	mu    sync.Mutex
	m     map[string]json.RawMessage
	limit int // total bytes of keys and values Set may reach; 0 is no limit
	// changes counts the Sets and Deletes, which a streamed turn reports.
	changes int
}

// ErrStateFull is returned by Set when the state would grow past its limit.
var ErrStateFull = errors.New("agent state full")

// NewState returns a State holding a copy of m.
func NewState(m map[string]json.RawMessage) *State {
	s := &State{m: make(map[string]json.RawMessage, len(m))}
	for k, v := range m {
		s.m[k] = bytes.Clone(v)
	}
	return s
}

// Get decodes the value stored under key into v. It reports false, and
// leaves v alone, when there is no such key.
func (s *State) Get(key string, v any) (bool, error) {
	s.mu.Lock()
	raw, ok := s.m[key]
	s.mu.Unlock()
	if !ok {
		return false, nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return true, fmt.Errorf("agent: state %q: %w", key, err)
	}
	return true, nil
}

// Set stores v under key. v must be encodable as JSON, and the state must
// stay within its limit (Config.MaxStateBytes for a turn's state): it is
// persisted with the session and read and written on every turn.
func (s *State) Set(key string, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("agent: state %q: %w", key, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.limit > 0 {
		size := s.sizeLocked() - len(s.m[key]) + len(raw)
		if _, ok := s.m[key]; !ok {
			size += len(key)
		}
		if size > s.limit {
			return fmt.Errorf("agent: state %q: %w: it would be %d bytes; at most %d", key, ErrStateFull, size, s.limit)
		}
	}
	s.m[key] = raw
	s.changes++
	return nil
}

// sizeLocked is the total size of keys and values.
func (s *State) sizeLocked() int {
	n := 0
	for k, v := range s.m {
		n += len(k) + len(v)
	}
	return n
}

// Delete removes key.
func (s *State) Delete(key string) {
	s.mu.Lock()
	if _, ok := s.m[key]; ok {
		delete(s.m, key)
		s.changes++
	}
	s.mu.Unlock()
}

// changed returns the count of changes, and whether it differs from since.
func (s *State) changed(since int) (int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changes, s.changes != since
}

// Snapshot returns a copy of every key and its JSON value.
func (s *State) Snapshot() map[string]json.RawMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]json.RawMessage, len(s.m))
	for k, v := range s.m {
		out[k] = bytes.Clone(v)
	}
	return out
}

// Keys returns the keys, in no particular order.
func (s *State) Keys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Collect(maps.Keys(s.m))
}

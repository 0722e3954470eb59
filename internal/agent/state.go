package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"sync"
)

// State is the agent's key-value store, persisted with the session. Values
// are JSON: they are encoded on the way in and decoded on the way out, so a
// caller never shares memory with the store. A State is safe for concurrent
// use, which matters because tools run concurrently.
type State struct {
	mu sync.Mutex
	m  map[string]json.RawMessage
}

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

// Set stores v under key. v must be encodable as JSON.
func (s *State) Set(key string, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("agent: state %q: %w", key, err)
	}
	s.mu.Lock()
	s.m[key] = raw
	s.mu.Unlock()
	return nil
}

// Delete removes key.
func (s *State) Delete(key string) {
	s.mu.Lock()
	delete(s.m, key)
	s.mu.Unlock()
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
	keys := make([]string, 0, len(s.m))
	for k := range maps.Keys(s.m) {
		keys = append(keys, k)
	}
	return keys
}

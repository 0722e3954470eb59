package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestStateCopiesInAndOut(t *testing.T) {
	src := map[string]json.RawMessage{"a": json.RawMessage(`{"x":1}`)}
	s := NewState(src)
	src["a"][2] = 'y' // the caller's map must not reach into the state

	var got map[string]int
	ok, err := s.Get("a", &got)
	if !ok || err != nil {
		t.Fatalf("Get(a) = %v, %v", ok, err)
	}
	if diff := cmp.Diff(map[string]int{"x": 1}, got); diff != "" {
		t.Errorf("Get(a) (-want +got):\n%s", diff)
	}

	list := []string{"p", "q"}
	if err := s.Set("list", list); err != nil {
		t.Fatal(err)
	}
	list[0] = "changed" // nor may a value set earlier
	snap := s.Snapshot()
	snap["list"][2] = 'Z' // nor a snapshot
	var gotList []string
	if _, err := s.Get("list", &gotList); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"p", "q"}, gotList); diff != "" {
		t.Errorf("Get(list) (-want +got):\n%s", diff)
	}

	s.Delete("a")
	if ok, _ := s.Get("a", &got); ok {
		t.Error("Get after Delete found the key")
	}
	if ok, err := s.Get("missing", &got); ok || err != nil {
		t.Errorf("Get(missing) = %v, %v; want false, nil", ok, err)
	}
}

func TestStateRejectsWhatJSONCannotHold(t *testing.T) {
	s := NewState(nil)
	if err := s.Set("f", func() {}); err == nil {
		t.Error("Set(func) succeeded")
	}
	if err := s.Set("c", make(chan int)); err == nil {
		t.Error("Set(chan) succeeded")
	}
	if len(s.Snapshot()) != 0 {
		t.Errorf("failed Sets stored something: %v", s.Snapshot())
	}
	if err := s.Set("n", 3); err != nil {
		t.Fatal(err)
	}
	var str string
	if _, err := s.Get("n", &str); err == nil {
		t.Error("Get into a mismatched type succeeded")
	}
}

func TestStateConcurrentUse(t *testing.T) {
	s := NewState(nil)
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			key := fmt.Sprintf("k%d", i)
			if err := s.Set(key, i); err != nil {
				t.Error(err)
			}
			var got int
			if _, err := s.Get(key, &got); err != nil || got != i {
				t.Errorf("Get(%s) = %d, %v", key, got, err)
			}
			_ = s.Snapshot()
		})
	}
	wg.Wait()
	if got := len(s.Keys()); got != 50 {
		t.Errorf("%d keys, want 50", got)
	}
}

func TestStateLimit(t *testing.T) {
	s := NewState(map[string]json.RawMessage{"old": json.RawMessage(`"0123456789"`)})
	s.limit = 40
	if err := s.Set("a", "12345678"); err != nil { // 3+12 + 1+10 = 26
		t.Fatal(err)
	}
	if err := s.Set("b", "123456789012345"); !errors.Is(err, ErrStateFull) { // would be 44
		t.Errorf("Set past the limit: %v", err)
	}
	if err := s.Set("a", "1"); err != nil { // replacing a value frees its room
		t.Errorf("Set that shrinks: %v", err)
	}
	if err := s.Set("b", "123456789012345"); err != nil { // 3+12 + 1+3 + 1+17 = 37
		t.Errorf("Set within the limit: %v", err)
	}
	if _, ok := s.Snapshot()["b"]; !ok {
		t.Error("b was not stored")
	}
}

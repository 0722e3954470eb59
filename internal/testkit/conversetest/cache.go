package conversetest

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"hash"
	"time"
)

// Defaults of [CacheConfig].
const (
	// DefaultCacheMinTokens is the smallest prefix a cache point caches:
	// 1,024 tokens, as for Claude 3.7 Sonnet, Sonnet 4 and 4.5, and Opus 4.
	DefaultCacheMinTokens = 1024
	// DefaultCacheTTL is how long an entry lives after its last hit.
	DefaultCacheTTL = 5 * time.Minute
	// CacheLookbackBlocks is how many block boundaries before a cache point
	// are also looked up. Bedrock checks "about 20 blocks" back, so a prefix
	// cached by the previous request hits even when this request's point has
	// moved on past the new turn.
	CacheLookbackBlocks = 20
)

// CacheConfig configures the simulated prompt cache ([Server.EnableCache]).
// Zero fields take their defaults.
type CacheConfig struct {
	// MinTokens is the smallest prefix, in estimated tokens, that a cache
	// point caches; a point below it caches nothing. Zero means
	// DefaultCacheMinTokens. Tests with short prompts set it low, such as 1.
	MinTokens int
	// TTL is how long an entry lives after it was written or last hit, for
	// points without "ttl": "1h" (those live an hour). Zero means
	// DefaultCacheTTL.
	TTL time.Duration
	// Now is the clock; nil means time.Now. Tests pass a fake clock to
	// step past the TTL without waiting.
	Now func() time.Time
}

// CacheStats counts what the simulated cache did since [Server.EnableCache].
type CacheStats struct {
	// Hits and Writes count the requests that read from and wrote to the
	// cache; one request may do both.
	Hits, Writes int
	// ReadInputTokens and WriteInputTokens sum the cacheReadInputTokens and
	// cacheWriteInputTokens the simulation computed, including for replies
	// whose scripted Usage was sent instead.
	ReadInputTokens, WriteInputTokens int
	// Entries is the number of entries stored, expired ones included until
	// they are swept.
	Entries int
}

// cacheKey identifies a prefix: a hash of the model ID and of the canonical
// JSON of every block before a boundary.
type cacheKey [sha256.Size]byte

type cacheEntry struct {
	expires time.Time
	ttl     time.Duration
}

// promptCache is the state of the simulated cache. It is guarded by
// Server.mu.
type promptCache struct {
	cfg     CacheConfig
	entries map[cacheKey]cacheEntry
	swept   int // len(entries) after the last sweep
	stats   CacheStats
}

// EnableCache turns on the simulated prompt cache, or restarts it empty
// with a new configuration. Without it cache points are checked but
// ignored, and usage is the plain estimate.
//
// With it, each successful request is measured at its block boundaries in
// Bedrock's order: each tool, each system block, then each content block of
// each message (cache points themselves are not blocks). Sizes are those of
// [EstimateInputBytes], at four bytes per token, plus the name, description
// and input schema of each toolSpec, because Bedrock caches tools too; so
// with the cache on, inputTokens also counts the tools. Then:
//
//   - The read is the longest cached prefix found at a cache point's
//     boundary or at one of the [CacheLookbackBlocks] boundaries before it.
//     The hit renews the entry.
//   - Each point beyond the read whose prefix has at least MinTokens writes
//     an entry; the write is the tokens from the read up to the last point
//     written. A point at or before the read renews its entry.
//   - inputTokens is the rest of the prompt, as Bedrock counts only the
//     uncached part there, and totalTokens adds all four counts.
//
// A scripted [Reply.Usage] is still what the client gets, but the cache is
// updated all the same. Replies with an Err leave it alone; a stream cut
// short by [Reply.WithStreamError] has already updated it. The model ID
// is part of every key, while toolChoice, inference settings and other
// members are not. [Server.Reset] keeps the cache.
func (s *Server) EnableCache(cfg CacheConfig) {
	if cfg.MinTokens <= 0 {
		cfg.MinTokens = DefaultCacheMinTokens
	}
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultCacheTTL
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cache = &promptCache{cfg: cfg, entries: make(map[cacheKey]cacheEntry)}
}

// CacheStats returns the counts of the simulated cache; all zero when it is
// not enabled.
func (s *Server) CacheStats() CacheStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cache == nil {
		return CacheStats{}
	}
	st := s.cache.stats
	st.Entries = len(s.cache.entries)
	return st
}

// cachePoint is a cache point at boundary b (after b blocks).
type cachePoint struct {
	boundary int
	ttl      time.Duration
}

// prefixes is a request measured at its block boundaries: keys[b] and
// bytes[b] describe the prefix of the first b blocks.
type prefixes struct {
	keys   []cacheKey
	bytes  []int
	points []cachePoint
}

// measure computes the prefixes of req. Hashing is chained, so each
// boundary costs only its own block.
func measure(req *Request, defaultTTL time.Duration) *prefixes {
	h := sha256.New()
	writeField(h, []byte(req.ModelID))
	p := &prefixes{}
	total := 0
	mark := func() {
		var k cacheKey
		h.Sum(k[:0])
		p.keys = append(p.keys, k)
		p.bytes = append(p.bytes, total)
	}
	point := func(cp *CachePointBlock) {
		ttl := defaultTTL
		if cp.TTL == "1h" {
			ttl = time.Hour
		}
		p.points = append(p.points, cachePoint{boundary: len(p.keys) - 1, ttl: ttl})
	}
	block := func(tag string, v any, n int) {
		data, err := json.Marshal(v)
		if err != nil {
			// The blocks were decoded from JSON, so they encode again; if
			// one did not, a key that matches nothing is the safe outcome.
			data = []byte(err.Error())
		}
		writeField(h, []byte(tag))
		writeField(h, data)
		total += n
		mark()
	}
	mark()
	if tc := req.ToolConfig; tc != nil {
		for i := range tc.Tools {
			t := &tc.Tools[i]
			if t.CachePoint != nil {
				point(t.CachePoint)
				continue
			}
			n := 0
			if sp := t.ToolSpec; sp != nil {
				n = len(sp.Name) + len(sp.Description) + len(sp.InputSchema.JSON)
			}
			block("tool", t, n)
		}
	}
	for i := range req.System {
		b := &req.System[i]
		if b.CachePoint != nil {
			point(b.CachePoint)
			continue
		}
		block("system", b, len(b.Text))
	}
	for i := range req.Messages {
		m := &req.Messages[i]
		// The message index and role go into the tag, so that the same
		// blocks split differently into messages are a different prefix.
		var tag [16]byte
		n := binary.PutUvarint(tag[:], uint64(i))
		tagStr := string(tag[:n]) + m.Role
		for j := range m.Content {
			b := &m.Content[j]
			if b.CachePoint != nil {
				point(b.CachePoint)
				continue
			}
			block(tagStr, b, contentBytes(m.Content[j:j+1]))
		}
	}
	return p
}

// writeField writes data to h with its length first, so that fields cannot
// run into each other.
func writeField(h hash.Hash, data []byte) {
	var n [binary.MaxVarintLen64]byte
	h.Write(n[:binary.PutUvarint(n[:], uint64(len(data)))])
	h.Write(data)
}

// cacheUsage runs req through the simulated cache and returns its read and
// written tokens and the estimated tokens of the whole prompt. ok is false
// when the cache is off.
func (s *Server) cacheUsage(req *Request) (read, write, total int, ok bool) {
	s.mu.Lock()
	c := s.cache
	s.mu.Unlock()
	if c == nil {
		return 0, 0, 0, false
	}
	// cfg never changes once the promptCache is made, so reading it
	// unlocked is safe; EnableCache replaces the whole value.
	p := measure(req, c.cfg.TTL)
	total = p.bytes[len(p.bytes)-1] / 4
	if len(p.points) == 0 {
		return 0, 0, total, true
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cache != c {
		return 0, 0, total, true // EnableCache restarted the cache meanwhile.
	}
	now := c.cfg.Now()
	c.sweep(now)
	live := func(b int) bool {
		e, found := c.entries[p.keys[b]]
		return found && now.Before(e.expires)
	}

	// The longest cached prefix at or shortly before any point.
	hit := 0
	for _, pt := range p.points {
		for b := pt.boundary; b >= max(1, pt.boundary-CacheLookbackBlocks) && b > hit; b-- {
			if live(b) {
				hit = b
				break
			}
		}
	}
	if hit > 0 {
		e := c.entries[p.keys[hit]]
		e.expires = now.Add(e.ttl)
		c.entries[p.keys[hit]] = e
		read = p.bytes[hit] / 4
	}

	top := hit
	for _, pt := range p.points {
		b := pt.boundary
		switch {
		case b <= hit:
			if live(b) {
				e := c.entries[p.keys[b]]
				e.expires = now.Add(e.ttl)
				c.entries[p.keys[b]] = e
			}
		case p.bytes[b]/4 >= c.cfg.MinTokens:
			c.entries[p.keys[b]] = cacheEntry{expires: now.Add(pt.ttl), ttl: pt.ttl}
			top = max(top, b)
		}
	}
	write = p.bytes[top]/4 - read

	if read > 0 {
		c.stats.Hits++
		c.stats.ReadInputTokens += read
	}
	if write > 0 {
		c.stats.Writes++
		c.stats.WriteInputTokens += write
	}
	return read, write, total, true
}

// sweep drops expired entries once the map has doubled since the last
// sweep, so that a long benchmark neither grows without bound nor pays for
// a full scan on every request.
func (c *promptCache) sweep(now time.Time) {
	if len(c.entries) < 2*c.swept+64 {
		return
	}
	for k, e := range c.entries {
		if !now.Before(e.expires) {
			delete(c.entries, k)
		}
	}
	c.swept = len(c.entries)
}

// usage is the token usage reported for reply to req: the scripted one, the
// cache simulation's, or the plain estimate. It runs the cache simulation
// even when the reply's usage is scripted.
func (s *Server) usage(req *Request, reply Reply) Usage {
	read, write, total, cached := s.cacheUsage(req)
	if reply.Usage != nil {
		return *reply.Usage
	}
	out := tokens(contentBytes(reply.Content))
	if !cached || read+write == 0 {
		in := tokens(EstimateInputBytes(req))
		if cached {
			in = max(1, total) // With the cache on, tools count too.
		}
		return Usage{InputTokens: in, OutputTokens: out, TotalTokens: in + out}
	}
	in := max(0, total-read-write)
	return Usage{
		InputTokens:           in,
		OutputTokens:          out,
		CacheReadInputTokens:  read,
		CacheWriteInputTokens: write,
		TotalTokens:           in + read + write + out,
	}
}

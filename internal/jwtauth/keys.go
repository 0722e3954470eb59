package jwtauth

import (
	"context"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// key is one signing key of the issuer's.
type key struct {
	pub *rsa.PublicKey
	alg string // the key's alg, or "" for any RSA algorithm
}

// keySet is the issuer's signing keys, as last fetched. Its mutex is held
// while it fetches, so that callers waiting for keys share one fetch.
type keySet struct {
	cfg *Config

	mu      sync.Mutex
	jwksURI string // from the discovery document, once read
	keys    map[string]key
	fetched time.Time // when keys were fetched; zero before the first fetch
}

// get returns the key kid: from the keys held while they are fresh, or
// else from a new fetch. A kid that the keys do not hold makes it fetch
// again, unless it fetched within RefreshInterval.
func (s *keySet) get(ctx context.Context, kid string) (key, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.cfg.Now()
	fresh := !s.fetched.IsZero() && now.Sub(s.fetched) < s.cfg.KeysTTL
	if k, ok := s.keys[kid]; ok && fresh {
		return k, nil
	}
	if fresh && now.Sub(s.fetched) < s.cfg.RefreshInterval {
		return key{}, invalid("the issuer has no key %q", kid)
	}
	if err := s.fetch(ctx); err != nil {
		return key{}, err
	}
	s.fetched = now
	if k, ok := s.keys[kid]; ok {
		return k, nil
	}
	return key{}, invalid("the issuer has no key %q", kid)
}

// fetch reads the discovery document, the first time, and the key set.
func (s *keySet) fetch(ctx context.Context) error {
	if s.jwksURI == "" {
		var doc struct {
			Issuer  string `json:"issuer"`
			JWKSURI string `json:"jwks_uri"`
		}
		discovery := strings.TrimSuffix(s.cfg.Issuer, "/") + "/.well-known/openid-configuration"
		if err := s.getJSON(ctx, discovery, &doc); err != nil {
			return err
		}
		// OpenID Connect Discovery: the document's issuer must be the one
		// it was fetched for, or it speaks for another.
		if doc.Issuer != s.cfg.Issuer {
			return fmt.Errorf("jwtauth: %s names the issuer %q, not %q", discovery, doc.Issuer, s.cfg.Issuer)
		}
		if u, err := url.Parse(doc.JWKSURI); err != nil || u.Scheme != "https" || u.Host == "" {
			return fmt.Errorf("jwtauth: %s gives the key set at %q, which is not an https URL", discovery, doc.JWKSURI)
		}
		s.jwksURI = doc.JWKSURI
	}
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := s.getJSON(ctx, s.jwksURI, &set); err != nil {
		return err
	}
	keys := map[string]key{}
	for _, raw := range set.Keys {
		if len(keys) == maxKeys {
			break
		}
		kid, k, ok := parseKey(raw)
		if ok {
			keys[kid] = k
		}
	}
	s.keys = keys
	return nil
}

// parseKey reads one JWK: an RSA signing key with a kid and at least
// minRSABits bits. Any other key is skipped: a key set may hold
// encryption keys, or keys of other types.
func parseKey(raw json.RawMessage) (string, key, bool) {
	var jwk struct {
		Kty, Kid, Use, Alg, N, E string
	}
	if json.Unmarshal(raw, &jwk) != nil || jwk.Kty != "RSA" || jwk.Kid == "" || (jwk.Use != "" && jwk.Use != "sig") {
		return "", key{}, false
	}
	if _, ok := hashes[jwk.Alg]; jwk.Alg != "" && !ok {
		return "", key{}, false
	}
	n, err1 := base64.RawURLEncoding.DecodeString(jwk.N)
	e, err2 := base64.RawURLEncoding.DecodeString(jwk.E)
	if err1 != nil || err2 != nil || len(e) == 0 || len(e) > 4 {
		return "", key{}, false
	}
	pub := &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
	if pub.N.BitLen() < minRSABits || pub.E < 3 || pub.E%2 == 0 {
		return "", key{}, false
	}
	return jwk.Kid, key{pub: pub, alg: jwk.Alg}, true
}

// getJSON fetches url and decodes its JSON, reading at most
// maxDocumentBytes.
func (s *keySet) getJSON(ctx context.Context, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("jwtauth: %s: %w", url, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := s.cfg.HTTPClient.Do(req)
	if err != nil {
		return fmt.Errorf("jwtauth: fetch %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("jwtauth: fetch %s: status %d", url, resp.StatusCode)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxDocumentBytes+1))
	if err != nil {
		return fmt.Errorf("jwtauth: fetch %s: %w", url, err)
	}
	if len(b) > maxDocumentBytes {
		return fmt.Errorf("jwtauth: fetch %s: more than %d bytes", url, maxDocumentBytes)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("jwtauth: %s is not the JSON expected: %w", url, err)
	}
	return nil
}

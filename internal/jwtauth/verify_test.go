package jwtauth_test

import (
	"context"
	"crypto"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lambda-agent/lambda-agent/internal/jwtauth"
)

// keys are RSA keys generated once per test binary: generating one takes
// long enough to matter when every test wants a few.
var keys = sync.OnceValue(func() map[string]*rsa.PrivateKey {
	out := map[string]*rsa.PrivateKey{}
	for _, name := range []string{"k1", "k2", "other"} {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		out[name] = k
	}
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		panic(err)
	}
	out["small"] = small
	return out
})

// jwk is a public key as a key set publishes it.
func jwk(kid string, k *rsa.PrivateKey, extra map[string]string) map[string]string {
	m := map[string]string{
		"kty": "RSA", "kid": kid,
		"n": base64.RawURLEncoding.EncodeToString(k.N.Bytes()),
		"e": base64.RawURLEncoding.EncodeToString(big.NewInt(int64(k.E)).Bytes()),
	}
	for name, v := range extra {
		if v == "" {
			delete(m, name)
		} else {
			m[name] = v
		}
	}
	return m
}

// issuer is an OpenID Connect issuer on an httptest TLS server: its
// discovery document and its key set, which a test may change, and counts
// of the requests for each.
type issuer struct {
	srv        *httptest.Server
	url        string
	mu         sync.Mutex
	jwks       []map[string]string
	discovery  map[string]string // nil: the right document
	status     int               // 0: 200
	discovered atomic.Int32
	fetched    atomic.Int32
}

func newIssuer(t *testing.T) *issuer {
	t.Helper()
	is := &issuer{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		is.discovered.Add(1)
		is.mu.Lock()
		defer is.mu.Unlock()
		if is.status != 0 {
			w.WriteHeader(is.status)
			return
		}
		doc := is.discovery
		if doc == nil {
			doc = map[string]string{"issuer": is.url, "jwks_uri": is.url + "/keys"}
		}
		_ = json.NewEncoder(w).Encode(doc)
	})
	mux.HandleFunc("GET /keys", func(w http.ResponseWriter, r *http.Request) {
		is.fetched.Add(1)
		is.mu.Lock()
		defer is.mu.Unlock()
		if is.status != 0 {
			w.WriteHeader(is.status)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": is.jwks})
	})
	is.srv = httptest.NewTLSServer(mux)
	t.Cleanup(is.srv.Close)
	is.url = is.srv.URL
	is.jwks = []map[string]string{jwk("k1", keys()["k1"], nil), jwk("k2", keys()["k2"], map[string]string{"alg": "RS256", "use": "sig"})}
	return is
}

func (is *issuer) setKeys(jwks ...map[string]string) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.jwks = jwks
}

// clock is a clock a test moves by hand.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

var epoch = time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)

func newVerifier(t *testing.T, is *issuer, c *clock) *jwtauth.Verifier {
	t.Helper()
	v, err := jwtauth.New(jwtauth.Config{
		Issuer:     is.url,
		Audiences:  []string{"client-a", "client-b"},
		HTTPClient: is.srv.Client(),
		Now:        c.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// sign returns a JWT of header and claims, signed with RSA PKCS #1 v1.5
// and hash by k.
func sign(t *testing.T, k *rsa.PrivateKey, hash crypto.Hash, header, claims map[string]any) string {
	t.Helper()
	signing := part(t, header) + "." + part(t, claims)
	h := hash.New()
	h.Write([]byte(signing))
	sig, err := rsa.SignPKCS1v15(rand.Reader, k, hash, h.Sum(nil))
	if err != nil {
		t.Fatal(err)
	}
	return signing + "." + base64.RawURLEncoding.EncodeToString(sig)
}

func part(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// claims are a valid token's claims for is, with changes: a nil value
// removes a claim.
func claims(is *issuer, changes map[string]any) map[string]any {
	c := map[string]any{
		"iss": is.url, "sub": "user-42", "aud": "client-a",
		"exp": epoch.Add(time.Hour).Unix(), "iat": epoch.Add(-time.Minute).Unix(), "nbf": epoch.Add(-time.Minute).Unix(),
		"token_use": "id",
	}
	for k, v := range changes {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	return c
}

func rs256(kid string) map[string]any {
	return map[string]any{"alg": "RS256", "kid": kid, "typ": "JWT"}
}

func TestVerify(t *testing.T) {
	is := newIssuer(t)
	k := keys()
	valid := sign(t, k["k1"], crypto.SHA256, rs256("k1"), claims(is, nil))
	tamper := func(token string) string { // another payload under the same signature
		p := strings.Split(token, ".")
		p[1] = part(t, claims(is, map[string]any{"sub": "admin"}))
		return strings.Join(p, ".")
	}
	hs256 := func() string { // the public key taken for an HMAC secret
		der, _ := x509.MarshalPKIXPublicKey(&k["k1"].PublicKey)
		signing := part(t, map[string]any{"alg": "HS256", "kid": "k1"}) + "." + part(t, claims(is, nil))
		m := hmac.New(sha256.New, der)
		m.Write([]byte(signing))
		return signing + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
	}
	tests := []struct {
		name    string
		token   string
		wantSub string // "" means refused
	}{
		{"an RS256 token", valid, "user-42"},
		{"after Bearer", "Bearer " + valid, "user-42"},
		{"after bearer, in another case", "bearer " + valid, "user-42"},
		{"RS384", sign(t, k["k1"], crypto.SHA384, map[string]any{"alg": "RS384", "kid": "k1"}, claims(is, nil)), "user-42"},
		{"RS512", sign(t, k["k1"], crypto.SHA512, map[string]any{"alg": "RS512", "kid": "k1"}, claims(is, nil)), "user-42"},
		{"the second key", sign(t, k["k2"], crypto.SHA256, rs256("k2"), claims(is, nil)), "user-42"},
		{"an audience list with an accepted one", sign(t, k["k1"], crypto.SHA256, rs256("k1"), claims(is, map[string]any{"aud": []string{"x", "client-b"}})), "user-42"},
		{"a Cognito access token: client_id, no aud", sign(t, k["k1"], crypto.SHA256, rs256("k1"), claims(is, map[string]any{"aud": nil, "client_id": "client-b", "token_use": "access"})), "user-42"},
		{"nbf and iat now", sign(t, k["k1"], crypto.SHA256, rs256("k1"), claims(is, map[string]any{"nbf": epoch.Unix(), "iat": epoch.Unix()})), "user-42"},
		{"no nbf and no iat", sign(t, k["k1"], crypto.SHA256, rs256("k1"), claims(is, map[string]any{"nbf": nil, "iat": nil})), "user-42"},

		{"a payload that is not the one signed", tamper(valid), ""},
		{"signed by a key the issuer does not publish, under its kid", sign(t, k["other"], crypto.SHA256, rs256("k1"), claims(is, nil)), ""},
		{"a kid the issuer does not have", sign(t, k["other"], crypto.SHA256, rs256("other"), claims(is, nil)), ""},
		{"no kid", sign(t, k["k1"], crypto.SHA256, map[string]any{"alg": "RS256"}, claims(is, nil)), ""},
		{"alg none", part(t, map[string]any{"alg": "none", "kid": "k1"}) + "." + part(t, claims(is, nil)) + ".", ""},
		{"HS256 with the public key for a secret", hs256(), ""},
		{"ES256", sign(t, k["k1"], crypto.SHA256, map[string]any{"alg": "ES256", "kid": "k1"}, claims(is, nil)), ""},
		{"PS256", sign(t, k["k1"], crypto.SHA256, map[string]any{"alg": "PS256", "kid": "k1"}, claims(is, nil)), ""},
		{"RS512 under a key published for RS256", sign(t, k["k2"], crypto.SHA512, map[string]any{"alg": "RS512", "kid": "k2"}, claims(is, nil)), ""},
		{"the header says RS256, the signature is RS512's", sign(t, k["k1"], crypto.SHA512, rs256("k1"), claims(is, nil)), ""},
		{"critical extensions", sign(t, k["k1"], crypto.SHA256, map[string]any{"alg": "RS256", "kid": "k1", "crit": []string{"exp"}}, claims(is, nil)), ""},
		{"another issuer", sign(t, k["k1"], crypto.SHA256, rs256("k1"), claims(is, map[string]any{"iss": "https://evil.example.com"})), ""},
		{"the issuer with a slash at the end", sign(t, k["k1"], crypto.SHA256, rs256("k1"), claims(is, map[string]any{"iss": is.url + "/"})), ""},
		{"no issuer", sign(t, k["k1"], crypto.SHA256, rs256("k1"), claims(is, map[string]any{"iss": nil})), ""},
		{"another audience", sign(t, k["k1"], crypto.SHA256, rs256("k1"), claims(is, map[string]any{"aud": "client-c"})), ""},
		{"an audience list without an accepted one", sign(t, k["k1"], crypto.SHA256, rs256("k1"), claims(is, map[string]any{"aud": []string{"x", "y"}})), ""},
		{"an empty audience list", sign(t, k["k1"], crypto.SHA256, rs256("k1"), claims(is, map[string]any{"aud": []string{}})), ""},
		{"an audience that is a number", sign(t, k["k1"], crypto.SHA256, rs256("k1"), claims(is, map[string]any{"aud": 7})), ""},
		{"aud wins over client_id when both are there", sign(t, k["k1"], crypto.SHA256, rs256("k1"), claims(is, map[string]any{"aud": "client-c", "client_id": "client-a"})), ""},
		{"another client, no aud", sign(t, k["k1"], crypto.SHA256, rs256("k1"), claims(is, map[string]any{"aud": nil, "client_id": "client-c"})), ""},
		{"neither aud nor client_id", sign(t, k["k1"], crypto.SHA256, rs256("k1"), claims(is, map[string]any{"aud": nil})), ""},
		{"expired a second ago", sign(t, k["k1"], crypto.SHA256, rs256("k1"), claims(is, map[string]any{"exp": epoch.Add(-time.Second).Unix()})), ""},
		{"expiring now", sign(t, k["k1"], crypto.SHA256, rs256("k1"), claims(is, map[string]any{"exp": epoch.Unix()})), ""},
		{"no expiry", sign(t, k["k1"], crypto.SHA256, rs256("k1"), claims(is, map[string]any{"exp": nil})), ""},
		{"an expiry that is a string", sign(t, k["k1"], crypto.SHA256, rs256("k1"), claims(is, map[string]any{"exp": "tomorrow"})), ""},
		{"not valid before a second from now", sign(t, k["k1"], crypto.SHA256, rs256("k1"), claims(is, map[string]any{"nbf": epoch.Add(time.Second).Unix()})), ""},
		{"issued in the future", sign(t, k["k1"], crypto.SHA256, rs256("k1"), claims(is, map[string]any{"iat": epoch.Add(time.Minute).Unix()})), ""},
		{"no subject", sign(t, k["k1"], crypto.SHA256, rs256("k1"), claims(is, map[string]any{"sub": nil})), ""},
		{"an empty subject", sign(t, k["k1"], crypto.SHA256, rs256("k1"), claims(is, map[string]any{"sub": ""})), ""},
		{"a subject that is a number", sign(t, k["k1"], crypto.SHA256, rs256("k1"), claims(is, map[string]any{"sub": 42})), ""},
		{"two parts", strings.Join(strings.Split(valid, ".")[:2], "."), ""},
		{"four parts", valid + ".x", ""},
		{"a header that is not base64url", "%%%." + strings.SplitN(valid, ".", 2)[1], ""},
		{"a header that is not JSON", base64.RawURLEncoding.EncodeToString([]byte("alg=RS256")) + "." + strings.SplitN(valid, ".", 2)[1], ""},
		{"a signature that is not base64url", strings.TrimSuffix(valid, valid[strings.LastIndex(valid, ".")+1:]) + "!!!", ""},
		{"empty", "", ""},
		{"Bearer alone", "Bearer ", ""},
		{"too long", "Bearer " + strings.Repeat("a", jwtauth.MaxTokenBytes), ""},
	}
	v := newVerifier(t, is, &clock{now: epoch})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := v.Verify(t.Context(), tt.token)
			if tt.wantSub != "" {
				if err != nil || c.Subject != tt.wantSub {
					t.Fatalf("Verify = %+v, %v; want subject %s", c, err, tt.wantSub)
				}
				return
			}
			if err == nil {
				t.Fatalf("Verify accepted it: %+v", c)
			}
			if !errors.Is(err, jwtauth.ErrInvalidToken) {
				t.Errorf("the error %v does not wrap ErrInvalidToken, so a bad token would answer 500, not 401", err)
			}
		})
	}
	if n := is.discovered.Load(); n != 1 {
		t.Errorf("the discovery document was read %d times; want once", n)
	}
}

// TestVerifyClaims: what a verified token says of its caller.
func TestVerifyClaims(t *testing.T) {
	is := newIssuer(t)
	v := newVerifier(t, is, &clock{now: epoch})
	c, err := v.Verify(t.Context(), sign(t, keys()["k1"], crypto.SHA256, rs256("k1"),
		claims(is, map[string]any{"aud": []string{"client-b", "z"}, "exp": 1795252502.5})))
	if err != nil {
		t.Fatal(err)
	}
	want := jwtauth.Claims{Subject: "user-42", Issuer: is.url, Audience: []string{"client-b", "z"}, Expires: time.Unix(1795252502, 5e8)}
	if c.Subject != want.Subject || c.Issuer != want.Issuer || strings.Join(c.Audience, ",") != "client-b,z" || !c.Expires.Equal(want.Expires) || c.ClientID != "" {
		t.Errorf("claims %+v, want %+v", c, want)
	}
}

// TestKeysAreCachedAndRefreshed: the discovery document is read once, the
// key set once per KeysTTL; a key the set does not hold makes the verifier
// fetch it again, but not more than once per RefreshInterval, so that a
// rotated key is found and a flood of unknown ones costs one fetch a
// minute; a key dropped from the set stops verifying once the set is
// fetched again.
func TestKeysAreCachedAndRefreshed(t *testing.T) {
	is := newIssuer(t)
	c := &clock{now: epoch}
	v := newVerifier(t, is, c)
	k := keys()
	token := func(kid string) string {
		return sign(t, k[kid], crypto.SHA256, rs256(kid), claims(is, map[string]any{"exp": epoch.Add(24 * time.Hour).Unix()}))
	}
	verify := func(kid string) error {
		_, err := v.Verify(t.Context(), token(kid))
		return err
	}
	counts := func() [2]int32 { return [2]int32{is.discovered.Load(), is.fetched.Load()} }

	for range 3 {
		if err := verify("k1"); err != nil {
			t.Fatal(err)
		}
	}
	if got := counts(); got != [2]int32{1, 1} {
		t.Errorf("three tokens: discovery, key set read %v times; want once each", got)
	}
	// A key published after the set was fetched: unknown, and not looked
	// for again within the refresh interval.
	is.setKeys(jwk("k1", k["k1"], nil), jwk("other", k["other"], nil))
	if err := verify("other"); !errors.Is(err, jwtauth.ErrInvalidToken) {
		t.Errorf("a new key, just fetched: %v", err)
	}
	c.add(jwtauth.DefaultRefreshInterval - time.Second)
	if err := verify("other"); !errors.Is(err, jwtauth.ErrInvalidToken) {
		t.Errorf("a new key within the refresh interval: %v", err)
	}
	if got := counts(); got != [2]int32{1, 1} {
		t.Errorf("unknown keys within the refresh interval: %v fetches; want none more", got)
	}
	c.add(time.Second)
	if err := verify("other"); err != nil {
		t.Errorf("the rotated key after the refresh interval: %v", err)
	}
	if got := counts(); got != [2]int32{1, 2} {
		t.Errorf("after the refresh interval: %v; want the key set read again, and the discovery document not", got)
	}
	// Held keys are used until the set is stale; then a key the issuer
	// dropped stops verifying.
	is.setKeys(jwk("other", k["other"], nil))
	c.add(jwtauth.DefaultKeysTTL - time.Second)
	if err := verify("k1"); err != nil {
		t.Errorf("a held key before the key set is stale: %v", err)
	}
	c.add(time.Second)
	if err := verify("k1"); !errors.Is(err, jwtauth.ErrInvalidToken) {
		t.Errorf("a dropped key after the key set went stale: %v", err)
	}
	if got := counts(); got != [2]int32{1, 3} {
		t.Errorf("after the key set went stale: %v; want it read a third time", got)
	}
}

// TestConcurrentVerifiesShareOneFetch: callers that find no keys wait for
// one fetch rather than each make their own.
func TestConcurrentVerifiesShareOneFetch(t *testing.T) {
	is := newIssuer(t)
	v := newVerifier(t, is, &clock{now: epoch})
	token := sign(t, keys()["k1"], crypto.SHA256, rs256("k1"), claims(is, nil))
	var wg sync.WaitGroup
	errs := make([]error, 16)
	for i := range errs {
		wg.Go(func() { _, errs[i] = v.Verify(context.Background(), token) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("caller %d: %v", i, err)
		}
	}
	if d, f := is.discovered.Load(), is.fetched.Load(); d != 1 || f != 1 {
		t.Errorf("16 callers: discovery %d, key set %d fetches; want 1, 1", d, f)
	}
}

// TestKeysThatDoNotQualify: a key set's keys that are not RSA signing keys
// of at least 2048 bits are skipped, and tokens they signed refused.
func TestKeysThatDoNotQualify(t *testing.T) {
	is := newIssuer(t)
	k := keys()
	is.setKeys(
		jwk("small", k["small"], nil),
		jwk("enc", k["other"], map[string]string{"use": "enc"}),
		jwk("ec", k["other"], map[string]string{"kty": "EC"}),
		jwk("hs", k["other"], map[string]string{"alg": "HS256"}),
		jwk("", k["other"], nil),
		jwk("even", k["other"], map[string]string{"e": base64.RawURLEncoding.EncodeToString([]byte{2})}),
		jwk("k1", k["k1"], nil),
	)
	v := newVerifier(t, is, &clock{now: epoch})
	for _, kid := range []string{"small", "enc", "ec", "hs", "even"} {
		key := k["other"]
		if kid == "small" {
			key = k["small"]
		}
		if _, err := v.Verify(t.Context(), sign(t, key, crypto.SHA256, rs256(kid), claims(is, nil))); !errors.Is(err, jwtauth.ErrInvalidToken) {
			t.Errorf("a token signed by the key %q: %v; want it refused", kid, err)
		}
	}
	if _, err := v.Verify(t.Context(), sign(t, k["k1"], crypto.SHA256, rs256("k1"), claims(is, nil))); err != nil {
		t.Errorf("the one good key: %v", err)
	}
}

// TestIssuerFailures: when the issuer cannot be asked, or answers what it
// should not, Verify fails with an error that is not ErrInvalidToken: the
// token is neither accepted nor refused, and the authorizer answers 500.
func TestIssuerFailures(t *testing.T) {
	token := func(is *issuer) string { return sign(t, keys()["k1"], crypto.SHA256, rs256("k1"), claims(is, nil)) }
	for _, tt := range []struct {
		name   string
		change func(is *issuer)
	}{
		{"the issuer answers 500", func(is *issuer) { is.status = 500 }},
		{"the discovery document names another issuer", func(is *issuer) {
			is.discovery = map[string]string{"issuer": "https://evil.example.com", "jwks_uri": is.url + "/keys"}
		}},
		{"the key set is not on https", func(is *issuer) {
			is.discovery = map[string]string{"issuer": is.url, "jwks_uri": strings.Replace(is.url, "https:", "http:", 1) + "/keys"}
		}},
		{"no key set", func(is *issuer) { is.discovery = map[string]string{"issuer": is.url} }},
		{"a key set too large to read", func(is *issuer) {
			huge := make([]map[string]string, 0, 3000)
			for range 3000 {
				huge = append(huge, jwk("k1", keys()["k1"], nil))
			}
			is.jwks = huge
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			is := newIssuer(t)
			tt.change(is)
			v := newVerifier(t, is, &clock{now: epoch})
			_, err := v.Verify(t.Context(), token(is))
			if err == nil || errors.Is(err, jwtauth.ErrInvalidToken) {
				t.Errorf("Verify = %v; want an error that is not ErrInvalidToken", err)
			}
		})
	}
	t.Run("a server whose certificate is not trusted", func(t *testing.T) {
		is := newIssuer(t)
		v, err := jwtauth.New(jwtauth.Config{Issuer: is.url, Audiences: []string{"client-a"}, Now: (&clock{now: epoch}).Now})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := v.Verify(t.Context(), token(is)); err == nil || errors.Is(err, jwtauth.ErrInvalidToken) {
			t.Errorf("Verify = %v; want a TLS failure", err)
		}
	})
}

func TestNewRefusesBadConfig(t *testing.T) {
	for _, cfg := range []jwtauth.Config{
		{Issuer: "http://issuer.example.com", Audiences: []string{"a"}},
		{Issuer: "issuer.example.com", Audiences: []string{"a"}},
		{Issuer: "https://issuer.example.com?x=1", Audiences: []string{"a"}},
		{Issuer: "https://issuer.example.com"},
		{Issuer: "https://issuer.example.com", Audiences: []string{"a", ""}},
	} {
		if _, err := jwtauth.New(cfg); err == nil {
			t.Errorf("New(%+v) accepted it", cfg)
		}
	}
}

package jwtauth

import (
	"bytes"
	"cmp"
	"context"
	"crypto"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// ErrInvalidToken is wrapped by the errors of tokens that Verify refuses.
var ErrInvalidToken = errors.New("invalid token")

// Defaults of Config.
const (
	// DefaultKeysTTL is how long a fetched key set is used: two hours, as
	// long as API Gateway's JWT authorizer keeps one.
	DefaultKeysTTL = 2 * time.Hour
	// DefaultRefreshInterval is the least time between two fetches of the
	// key set for tokens that name a key it does not hold, so that such
	// tokens cannot make every invocation call the issuer.
	DefaultRefreshInterval = time.Minute
	// DefaultFetchTimeout bounds each request to the issuer.
	DefaultFetchTimeout = 5 * time.Second
)

// Limits on what is read, so that a token or an issuer's answer cannot
// take the function's memory.
const (
	// MaxTokenBytes is the longest token Verify reads. API Gateway passes
	// at most 10 KB of headers to an authorizer anyway.
	MaxTokenBytes = 16 << 10
	// maxDocumentBytes bounds the discovery document and the key set.
	maxDocumentBytes = 1 << 20
	// maxKeys is the most keys kept from a key set.
	maxKeys = 100
	// minRSABits is the smallest RSA key accepted.
	minRSABits = 2048
)

// Config configures a Verifier.
type Config struct {
	// Issuer is the tokens' issuer, an https URL, which iss must equal
	// exactly, such as https://cognito-idp.eu-west-1.amazonaws.com/POOL.
	Issuer string
	// Audiences are the accepted values of aud (or of client_id, in a
	// token without aud). At least one is required.
	Audiences []string
	// HTTPClient fetches the discovery document and the key set; nil means
	// a client with DefaultFetchTimeout.
	HTTPClient *http.Client
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// KeysTTL is how long a key set is used; 0 means DefaultKeysTTL.
	KeysTTL time.Duration
	// RefreshInterval is the least time between fetches for unknown keys;
	// 0 means DefaultRefreshInterval.
	RefreshInterval time.Duration
}

// Verifier verifies tokens of one issuer. It is safe for concurrent use:
// the key set it caches is guarded, and fetched by one caller at a time.
type Verifier struct {
	cfg  Config
	keys *keySet
}

// New returns a Verifier, or an error if cfg is not usable.
func New(cfg Config) (*Verifier, error) {
	u, err := url.Parse(cfg.Issuer)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("jwtauth: the issuer %q is not an https URL without a query", cfg.Issuer)
	}
	if len(cfg.Audiences) == 0 || slices.Contains(cfg.Audiences, "") {
		return nil, errors.New("jwtauth: at least one audience is required, and none may be empty")
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: DefaultFetchTimeout}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.KeysTTL = cmp.Or(cfg.KeysTTL, DefaultKeysTTL)
	cfg.RefreshInterval = cmp.Or(cfg.RefreshInterval, DefaultRefreshInterval)
	return &Verifier{cfg: cfg, keys: &keySet{cfg: &cfg}}, nil
}

// Claims are what a verified token says of its caller.
type Claims struct {
	Subject  string
	Issuer   string
	Audience []string // aud, as a list; empty when the token has none
	ClientID string   // client_id, as Cognito's access tokens carry it
	Expires  time.Time
}

// hashes are the accepted algorithms: RSA ones, as API Gateway's JWT
// authorizer accepts.
var hashes = map[string]crypto.Hash{"RS256": crypto.SHA256, "RS384": crypto.SHA384, "RS512": crypto.SHA512}

// Verify checks token, alone or after "Bearer ", and returns its claims.
// A token that fails a check gets an error wrapping ErrInvalidToken; a
// failure to fetch the issuer's keys, another error.
func (v *Verifier) Verify(ctx context.Context, token string) (*Claims, error) {
	if len(token) > MaxTokenBytes {
		return nil, invalid("the token is %d bytes; at most %d", len(token), MaxTokenBytes)
	}
	if scheme, rest, ok := strings.Cut(token, " "); ok && strings.EqualFold(scheme, "Bearer") {
		token = strings.TrimLeft(rest, " ")
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, invalid("not a signed JWT: %d parts, want 3", len(parts))
	}
	var header struct {
		Alg  string          `json:"alg"`
		Kid  string          `json:"kid"`
		Crit json.RawMessage `json:"crit"`
	}
	if err := decodePart(parts[0], &header); err != nil {
		return nil, invalid("the header: %v", err)
	}
	hash, ok := hashes[header.Alg]
	if !ok {
		return nil, invalid("the algorithm %q is not one of RS256, RS384 or RS512", header.Alg)
	}
	if header.Kid == "" {
		return nil, invalid("the header has no kid, so no key of the issuer's signed it")
	}
	if header.Crit != nil {
		return nil, invalid("the header has critical extensions (crit), which this verifier does not know")
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return nil, invalid("the signature is not base64url: %v", err)
	}
	k, err := v.keys.get(ctx, header.Kid)
	if err != nil {
		return nil, err
	}
	if k.alg != "" && k.alg != header.Alg {
		return nil, invalid("the key %q is for %s, not %s", header.Kid, k.alg, header.Alg)
	}
	h := hash.New()
	h.Write([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(k.pub, hash, h.Sum(nil), sig); err != nil {
		return nil, invalid("the signature does not verify with the key %q", header.Kid)
	}
	return v.check(parts[1])
}

// check checks the claims of a token whose signature verified.
func (v *Verifier) check(payload string) (*Claims, error) {
	var raw struct {
		Iss      *string         `json:"iss"`
		Sub      *string         `json:"sub"`
		Aud      json.RawMessage `json:"aud"`
		ClientID *string         `json:"client_id"`
		Exp      *json.Number    `json:"exp"`
		Nbf      *json.Number    `json:"nbf"`
		Iat      *json.Number    `json:"iat"`
	}
	if err := decodePart(payload, &raw); err != nil {
		return nil, invalid("the claims: %v", err)
	}
	c := &Claims{}
	if raw.Iss == nil || *raw.Iss != v.cfg.Issuer {
		return nil, invalid("the issuer (iss) is not %q", v.cfg.Issuer)
	}
	c.Issuer = *raw.Iss
	switch {
	case raw.Aud != nil && !bytes.Equal(raw.Aud, []byte("null")):
		aud, err := audience(raw.Aud)
		if err != nil {
			return nil, err
		}
		c.Audience = aud
		if !slices.ContainsFunc(aud, func(a string) bool { return slices.Contains(v.cfg.Audiences, a) }) {
			return nil, invalid("the audience (aud) %q is none of the accepted ones", aud)
		}
	case raw.ClientID != nil:
		// Only without aud, as API Gateway does: a Cognito access token
		// names its app client here.
		if !slices.Contains(v.cfg.Audiences, *raw.ClientID) {
			return nil, invalid("the client (client_id) %q is none of the accepted audiences", *raw.ClientID)
		}
		c.ClientID = *raw.ClientID
	default:
		return nil, invalid("the token has neither an audience (aud) nor a client_id")
	}
	now := v.cfg.Now()
	exp, err := numericDate("exp", raw.Exp)
	if err != nil {
		return nil, err
	}
	if exp.IsZero() {
		return nil, invalid("the token has no expiry (exp)")
	}
	if !exp.After(now) {
		return nil, invalid("the token expired at %s", exp.UTC().Format(time.RFC3339))
	}
	c.Expires = exp
	for _, d := range []struct {
		name string
		v    *json.Number
	}{{"nbf", raw.Nbf}, {"iat", raw.Iat}} {
		t, err := numericDate(d.name, d.v)
		if err != nil {
			return nil, err
		}
		if t.After(now) {
			return nil, invalid("the token's %s, %s, is in the future", d.name, t.UTC().Format(time.RFC3339))
		}
	}
	if raw.Sub == nil || *raw.Sub == "" {
		return nil, invalid("the token has no subject (sub), so it names no caller")
	}
	c.Subject = *raw.Sub
	return c, nil
}

// audience reads aud: a string, or a list of strings.
func audience(raw json.RawMessage) ([]string, error) {
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, invalid("the audience (aud) is neither a string nor a list of strings")
	}
	return many, nil
}

// numericDate reads a JWT NumericDate, seconds since the epoch; the zero
// time for an absent claim.
func numericDate(name string, n *json.Number) (time.Time, error) {
	if n == nil {
		return time.Time{}, nil
	}
	f, err := n.Float64()
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 || f > 1<<40 {
		return time.Time{}, invalid("%s is not a date in seconds", name)
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)), nil
}

// decodePart decodes a base64url JSON object of a token.
func decodePart(part string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(part)
	if err != nil {
		return fmt.Errorf("not base64url: %w", err)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("not a JSON object: %w", err)
	}
	if d.More() {
		return errors.New("more than one JSON value")
	}
	return nil
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidToken, fmt.Sprintf(format, args...))
}

package remote_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/lambda-agent/lambda-agent/internal/remote"
)

var signedHeaders = regexp.MustCompile(`^AWS4-HMAC-SHA256 Credential=[^,]+, SignedHeaders=([a-z0-9;-]+), Signature=[0-9a-f]{64}$`)

// verifySigV4 checks r's signature as a function URL would: it signs the
// same request again, with the same signer and credentials, for the
// service lambda in region, and compares.
func verifySigV4(r *http.Request, body []byte, creds aws.Credentials, region string) error {
	auth := r.Header.Get("Authorization")
	m := signedHeaders.FindStringSubmatch(auth)
	if m == nil {
		return fmt.Errorf("no SigV4 Authorization header: %q", auth)
	}
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	if got := r.Header.Get("X-Amz-Content-Sha256"); got != hash {
		return fmt.Errorf("X-Amz-Content-Sha256 %q, the body's hash is %q", got, hash)
	}
	at, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return fmt.Errorf("X-Amz-Date: %w", err)
	}
	again, err := http.NewRequest(r.Method, "http://"+r.Host+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		return err
	}
	for _, h := range strings.Split(m[1], ";") {
		if h != "host" && h != "content-length" {
			again.Header[http.CanonicalHeaderKey(h)] = r.Header.Values(h)
		}
	}
	if err := v4.NewSigner().SignHTTP(again.Context(), creds, again, hash, "lambda", region, at); err != nil {
		return err
	}
	if want := again.Header.Get("Authorization"); want != auth {
		return fmt.Errorf("signature\n%s\nwant\n%s", auth, want)
	}
	return nil
}

// TestA2AIAMSigning: with auth aws_iam, every request, the card's
// included, is signed with SigV4 for lambda in the region, over its body;
// the server's check of the signature would catch a change.
func TestA2AIAMSigning(t *testing.T) {
	provider := credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "session")
	creds, _ := provider.Retrieve(t.Context())
	var mu sync.Mutex
	var checked []string
	srv := startAgent(t, serverOpts{streaming: true, check: func(r *http.Request, body []byte) {
		mu.Lock()
		defer mu.Unlock()
		if err := verifySigV4(r, body, creds, "eu-west-3"); err != nil {
			checked = append(checked, fmt.Sprintf("%s %s: %v", r.Method, r.URL.Path, err))
			return
		}
		if len(body) > 0 {
			// The check fails for a body that is not the one signed.
			if err := verifySigV4(r, append(bytes.Clone(body), ' '), creds, "eu-west-3"); err == nil {
				checked = append(checked, "a changed body passed the check")
			}
		}
		if r.Header.Get("X-Amz-Security-Token") != "session" {
			checked = append(checked, "no session token")
		}
		checked = append(checked, r.Method+" ok")
	}})
	getenv := func(k string) string {
		if k == "AWS_REGION" {
			return "eu-west-3"
		}
		return ""
	}
	set, logs := newA2A(t, remote.A2AOptions{Credentials: provider, Getenv: getenv},
		remote.A2AAgent{Name: "weather", CardURL: srv.CardURL, Auth: remote.A2AAuthIAM})
	c, err := set.Client(t.Context(), "weather")
	if err != nil {
		t.Fatalf("%v\n%s", err, logs)
	}
	if _, err := c.Send(t.Context(), remote.SendInput{Text: "hi"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SendStreaming(t.Context(), remote.SendInput{Text: "hi"}, nil); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"GET ok", "POST ok", "POST ok"}; strings.Join(checked, "\n") != strings.Join(want, "\n") {
		t.Errorf("checks:\n%s\nwant:\n%s", strings.Join(checked, "\n"), strings.Join(want, "\n"))
	}
}

// TestA2AIAMSignsForTheOriginOnly: a card that points elsewhere gets
// nothing signed sent there; an agent without credentials is left out.
func TestA2AIAMSignsForTheOriginOnly(t *testing.T) {
	provider := credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", "")
	elsewhere := startAgent(t, serverOpts{})
	srv := startAgent(t, serverOpts{card: func(_ string, c *a2a.AgentCard) {
		c.SupportedInterfaces = []*a2a.AgentInterface{a2a.NewAgentInterface(elsewhere.URL+"/a2a", a2a.TransportProtocolJSONRPC)}
	}})
	getenv := func(k string) string {
		if k == "AWS_REGION" {
			return "us-east-1"
		}
		return ""
	}
	set, _ := newA2A(t, remote.A2AOptions{Credentials: provider, Getenv: getenv},
		remote.A2AAgent{Name: "weather", CardURL: srv.CardURL, Auth: remote.A2AAuthIAM})
	if _, err := set.Client(t.Context(), "weather"); !errors.Is(err, remote.ErrOtherOrigin) {
		t.Errorf("Client: %v", err)
	}
	if got := srv.Requests(); len(got) != 1 || !strings.HasPrefix(got[0].Header.Get("Authorization"), "AWS4-HMAC-SHA256 ") {
		t.Errorf("the card's request was not signed: %v", got)
	}
	if got := elsewhere.Requests(); len(got) != 0 {
		t.Errorf("%d requests elsewhere", len(got))
	}

	ok := startAgent(t, serverOpts{})
	set, logs := newA2A(t, remote.A2AOptions{Getenv: getenv}, remote.A2AAgent{Name: "weather", CardURL: ok.CardURL, Auth: remote.A2AAuthIAM})
	if !strings.Contains(logs.String(), "A2A agent left out") || !strings.Contains(logs.String(), "no AWS credentials") {
		t.Errorf("no warning at NewA2A:\n%s", logs)
	}
	if _, err := set.Client(t.Context(), "weather"); err == nil || !strings.Contains(err.Error(), "no AWS credentials") {
		t.Errorf("without credentials: %v", err)
	}
	if got := ok.Requests(); len(got) != 0 {
		t.Errorf("%d requests sent unsigned", len(got))
	}
}

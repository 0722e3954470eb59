package remote

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// iamSigner signs an agent's requests with SigV4, for a Lambda function
// URL whose auth type is AWS_IAM.
type iamSigner struct {
	creds  aws.CredentialsProvider
	region string
	signer *v4.Signer
	now    func() time.Time
}

// signingRegion is the region to sign for: the function URL's, whose
// host is <id>.lambda-url.<region>.on.aws, or AWS_REGION's for another
// host.
func signingRegion(host string, getenv func(string) string) (string, error) {
	if l := strings.Split(strings.ToLower(host), "."); len(l) == 5 && l[0] != "" && l[1] == "lambda-url" && l[2] != "" && l[3] == "on" && l[4] == "aws" {
		return l[2], nil
	}
	if r := getenv("AWS_REGION"); r != "" {
		return r, nil
	}
	return "", fmt.Errorf("auth %s: %s is not a function URL, and AWS_REGION is not set", A2AAuthIAM, host)
}

// sign signs r for the service lambda, with the hash of its body in
// X-Amz-Content-Sha256, as function URLs want it for a request with a
// body.
func (s *iamSigner) sign(r *http.Request) error {
	var body []byte
	if r.Body != nil && r.Body != http.NoBody {
		var err error
		if r.GetBody != nil {
			rc, gerr := r.GetBody()
			if gerr != nil {
				return fmt.Errorf("sign: %w", gerr)
			}
			body, err = io.ReadAll(rc)
			_ = rc.Close()
		} else {
			body, err = io.ReadAll(r.Body)
			_ = r.Body.Close()
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		if err != nil {
			return fmt.Errorf("sign: read the body: %w", err)
		}
	}
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	r.Header.Set("X-Amz-Content-Sha256", hash)
	if s.creds == nil {
		return errors.New("sign: no AWS credentials")
	}
	creds, err := s.creds.Retrieve(r.Context())
	if err != nil {
		return fmt.Errorf("sign: AWS credentials: %w", err)
	}
	if err := s.signer.SignHTTP(r.Context(), creds, r, hash, "lambda", s.region, s.now()); err != nil {
		return fmt.Errorf("sign: %w", err)
	}
	return nil
}

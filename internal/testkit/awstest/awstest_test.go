package awstest_test

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"

	"github.com/lambda-agent/lambda-agent/internal/testkit/awstest"
)

func TestSignedRegion(t *testing.T) {
	const valid = "AWS4-HMAC-SHA256 Credential=AKID/20250101/eu-north-1/ssm/aws4_request, SignedHeaders=host;x-amz-date, Signature=abc"
	tests := []struct {
		name       string
		auth, date string
		wantRegion string
		wantCode   string
	}{
		{name: "missing header", date: "20250101T000000Z", wantCode: "MissingAuthenticationTokenException"},
		{name: "not SigV4", auth: "Basic dXNlcg==", date: "20250101T000000Z", wantCode: "IncompleteSignatureException"},
		{name: "no date", auth: valid, wantCode: "IncompleteSignatureException"},
		{name: "wrong service", auth: "AWS4-HMAC-SHA256 Credential=AKID/20250101/eu-north-1/lambda/aws4_request, SignedHeaders=host, Signature=abc",
			date: "20250101T000000Z", wantCode: "InvalidSignatureException"},
		{name: "valid shape", auth: valid, date: "20250101T000000Z", wantRegion: "eu-north-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/", nil)
			if tt.auth != "" {
				r.Header.Set("Authorization", tt.auth)
			}
			if tt.date != "" {
				r.Header.Set("X-Amz-Date", tt.date)
			}
			got, err := awstest.SignedRegion(r, "ssm")
			if tt.wantCode == "" {
				if err != nil || got != tt.wantRegion {
					t.Errorf("SignedRegion = %q, %v; want %q, nil", got, err, tt.wantRegion)
				}
				return
			}
			if err == nil || err.Code != tt.wantCode || err.Status != http.StatusForbidden || got != "" {
				t.Errorf("SignedRegion = %q, %v; want a 403 %s", got, err, tt.wantCode)
			}
		})
	}
}

func TestWrite(t *testing.T) {
	e := &awstest.Error{Status: http.StatusBadRequest, Code: "ValidationException", MessageKey: "Message", Message: "bad",
		Fields: map[string]string{"Type": "User"}}
	tests := []struct {
		name                  string
		write                 func(http.ResponseWriter)
		wantType, wantErrType string
		wantBody              string
	}{
		{"restJson1", e.WriteRESTJSON, "application/json", "ValidationException", `{"Message":"bad","Type":"User"}`},
		{"awsJson1_1", e.WriteJSON11, "application/x-amz-json-1.1", "", `{"Message":"bad","Type":"User","__type":"ValidationException"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			tt.write(rec)
			if rec.Code != http.StatusBadRequest || rec.Header().Get("Content-Type") != tt.wantType ||
				rec.Header().Get("X-Amzn-Errortype") != tt.wantErrType || rec.Body.String() != tt.wantBody {
				t.Errorf("got %d %q %q %s, want 400 %q %q %s", rec.Code, rec.Header().Get("Content-Type"),
					rec.Header().Get("X-Amzn-Errortype"), rec.Body, tt.wantType, tt.wantErrType, tt.wantBody)
			}
		})
	}
}

func TestNewRequestID(t *testing.T) {
	uuid := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	if a, b := awstest.NewRequestID(), awstest.NewRequestID(); !uuid.MatchString(a) || a == b {
		t.Errorf("NewRequestID = %q, %q; want two different version 4 UUIDs", a, b)
	}
}

package testkit

import (
	"path/filepath"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
)

// DefaultAWSConfig loads the SDK's default configuration the way a
// function does at init, from an environment that holds only static
// credentials, region, and the given variables (such as
// AWS_ENDPOINT_URL_LAMBDA): the machine's profiles, config files and
// endpoint settings are set aside for the test.
func DefaultAWSConfig(t *testing.T, region string, vars map[string]string) aws.Config {
	t.Helper()
	dir := t.TempDir()
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID":                   "AKID",
		"AWS_SECRET_ACCESS_KEY":               "SECRET",
		"AWS_SESSION_TOKEN":                   "",
		"AWS_REGION":                          region,
		"AWS_PROFILE":                         "",
		"AWS_CONFIG_FILE":                     filepath.Join(dir, "config"),
		"AWS_SHARED_CREDENTIALS_FILE":         filepath.Join(dir, "credentials"),
		"AWS_ENDPOINT_URL":                    "",
		"AWS_IGNORE_CONFIGURED_ENDPOINT_URLS": "",
	} {
		t.Setenv(k, v)
	}
	for k, v := range vars {
		t.Setenv(k, v)
	}
	cfg, err := config.LoadDefaultConfig(t.Context())
	if err != nil {
		t.Fatalf("LoadDefaultConfig: %v", err)
	}
	return cfg
}

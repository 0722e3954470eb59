package app

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// ModelARN is an entry of ADDITIONAL_MODEL_ARNS: a Bedrock model the
// functions' role may invoke besides MODEL_ID's and SUMMARIZER_MODEL_ID's,
// which the template grants from their own parameters.
type ModelARN struct {
	// Region is the ARN's Region, or "*" for every Region.
	Region string
	// Profile is true for an inference profile's ARN, false for a
	// foundation model's.
	Profile bool
	// ID is the model's or the profile's id.
	ID string
}

// modelARNPattern is an ARN of ADDITIONAL_MODEL_ARNS: a foundation model's
// (no account) or an inference profile's (an account), in one Region or
// in every Region (*). The partition is not checked: the functions cannot
// know theirs without a call.
var modelARNPattern = regexp.MustCompile(`^arn:aws[a-z-]*:bedrock:([a-z0-9-]+|\*):(|[0-9]{12}):(foundation-model|inference-profile)/(` + modelIDRule + `)$`)

// modelIDRule is what a model_id may be: a foundation model id or a
// system-defined inference profile id, as the template's ModelId, of at
// most maxModelID characters, which validModelID checks apart: a counted
// repetition compiles to a program whose size costs the functions' cold
// start.
const (
	modelIDRule = `[a-zA-Z0-9._:-]+`
	maxModelID  = 128
)

var modelIDPattern = regexp.MustCompile(`^` + modelIDRule + `$`)

// validModelID reports whether id is a model id.
func validModelID(id string) bool { return len(id) <= maxModelID && modelIDPattern.MatchString(id) }

// parseModelARNs reads ADDITIONAL_MODEL_ARNS, a comma-separated list.
func parseModelARNs(v string) ([]ModelARN, error) {
	var out []ModelARN
	var bad []string
	for _, s := range list(v) {
		m := modelARNPattern.FindStringSubmatch(s)
		profile := m != nil && m[3] == "inference-profile"
		if m == nil || profile != (m[2] != "") || len(m[4]) > maxModelID {
			bad = append(bad, fmt.Sprintf("%q", s))
			continue
		}
		out = append(out, ModelARN{Region: m[1], Profile: profile, ID: m[4]})
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("%s: want ARNs of foundation models (arn:aws:bedrock:REGION::foundation-model/ID) and of inference profiles (arn:aws:bedrock:REGION:ACCOUNT:inference-profile/ID), REGION a Region or *", strings.Join(bad, ", "))
	}
	return out, nil
}

// isProfileID says whether id is a cross-Region inference profile's,
// which puts a geography before the model's own id (us.anthropic.…):
// a foundation model's id has one dot, between provider and model.
func isProfileID(id string) bool { return strings.Count(id, ".") >= 2 }

// modelGrants returns the ARNs the functions' role needs to invoke id, in
// region (empty when unknown): for a foundation model, its ARN in region;
// for an inference profile, the profile's ARN in region, in any account,
// and its foundation model's in every Region (*), since the functions
// cannot know which Regions the profile routes to. An entry of every
// Region covers a Region's.
func modelGrants(id, region string) []ModelARN {
	if !isProfileID(id) {
		return []ModelARN{{Region: region, ID: id}}
	}
	_, model, _ := strings.Cut(id, ".")
	return []ModelARN{{Region: region, Profile: true, ID: id}, {Region: "*", ID: model}}
}

// String is the ARN, in the aws partition, with ACCOUNT for a profile's
// account and REGION for an unknown Region.
func (m ModelARN) String() string {
	region := m.Region
	if region == "" {
		region = "REGION"
	}
	if m.Profile {
		return "arn:aws:bedrock:" + region + ":ACCOUNT:inference-profile/" + m.ID
	}
	return "arn:aws:bedrock:" + region + "::foundation-model/" + m.ID
}

// checkModel says why the functions may not invoke id, or nil when they
// may: it is MODEL_ID or SUMMARIZER_MODEL_ID, or ADDITIONAL_MODEL_ARNS
// holds every ARN it needs (modelGrants).
func (c *Config) checkModel(id string) error {
	if id == c.ModelID || id == c.SummarizerModelID {
		return nil
	}
	var missing []string
	for _, need := range modelGrants(id, c.Region) {
		if !slices.ContainsFunc(c.AdditionalModels, func(have ModelARN) bool {
			return have.Profile == need.Profile && have.ID == need.ID && (have.Region == "*" || have.Region == need.Region && need.Region != "")
		}) {
			missing = append(missing, need.String())
		}
	}
	if len(missing) == 0 {
		return nil
	}
	err := fmt.Errorf("the functions may not call %s: it is neither MODEL_ID nor SUMMARIZER_MODEL_ID, and ADDITIONAL_MODEL_ARNS lacks %s", id, strings.Join(missing, " and "))
	if c.Region == "" {
		err = fmt.Errorf("%w (AWS_REGION is not set, so only ARNs of every Region, *, count)", err)
	}
	return err
}

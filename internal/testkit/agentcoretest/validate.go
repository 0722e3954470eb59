package agentcoretest

import (
	"regexp"
	"unicode/utf8"

	"github.com/lambda-agent/lambda-agent/internal/testkit/awstest"
)

// The patterns and limits of the AgentCore data plane's API reference.
var (
	memoryIDPattern = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9-_]{0,99}-[a-zA-Z0-9]{10}$`)
	// actorIDPattern is the one ListEvents, DeleteEvent and the Event
	// shape state. CreateEvent's page now also allows colons between
	// segments; the stand-in holds every operation to the stricter form,
	// which is all lambda-agent sends.
	actorIDPattern   = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9-_/]*$`)
	sessionIDPattern = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9-_]*$`)
	eventIDPattern   = regexp.MustCompile(`^[0-9]+#[a-fA-F0-9]+$`)
	strategyPattern  = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9-_]*$`)
	metadataKey      = regexp.MustCompile(`^[a-zA-Z0-9\s._:/=+@-]*$`)
)

// Limits from the API reference.
const (
	MaxActorID      = 255
	MaxSessionID    = 100
	MaxPayloadItems = 100  // PayloadTypeList
	MaxText         = 9000 // Content.text, in characters
	MaxMetadata     = 15   // MetadataMap entries
	MaxMetadataKey  = 128
	MaxResults      = 100 // maxResults of the paged operations
	DefaultResults  = 20
	MaxTopK         = 100
	DefaultTopK     = 10
	MaxSearchQuery  = 10000
	MaxNamespace    = 1024
	MaxStrategyID   = 100
)

func validMemoryID(id string) *awstest.Error {
	if len(id) < 12 || !memoryIDPattern.MatchString(id) {
		return invalidField("1 validation error detected: Value '%s' at 'memoryId' failed to satisfy constraint: Member must satisfy regular expression pattern: %s", id, memoryIDPattern)
	}
	return nil
}

// validID checks a string member against its length and pattern.
func validID(member, v string, max int, pattern *regexp.Regexp) *awstest.Error {
	n := utf8.RuneCountInString(v)
	if n < 1 || n > max {
		return invalidField("1 validation error detected: Value at '%s' failed to satisfy constraint: Member must have length between 1 and %d", member, max)
	}
	if pattern != nil && !pattern.MatchString(v) {
		return invalidField("1 validation error detected: Value '%s' at '%s' failed to satisfy constraint: Member must satisfy regular expression pattern: %s", v, member, pattern)
	}
	return nil
}

func validActorSession(actorID, sessionID string) *awstest.Error {
	if aerr := validID("actorId", actorID, MaxActorID, actorIDPattern); aerr != nil {
		return aerr
	}
	return validID("sessionId", sessionID, MaxSessionID, sessionIDPattern)
}

// pageSize checks maxResults and applies its default.
func pageSize(maxResults *int) (int, *awstest.Error) {
	if maxResults == nil {
		return DefaultResults, nil
	}
	if *maxResults < 1 || *maxResults > MaxResults {
		return 0, invalidField("1 validation error detected: Value '%d' at 'maxResults' failed to satisfy constraint: Member must have value between 1 and %d", *maxResults, MaxResults)
	}
	return *maxResults, nil
}

// Package agentcoretest is a stand-in for the Bedrock AgentCore Memory
// data plane: an HTTP server on a loopback port that speaks AgentCore's
// wire protocol (restJson1), so the real bedrockagentcore SDK client
// reaches it through BaseEndpoint or AWS_ENDPOINT_URL_BEDROCK_AGENTCORE and
// every call goes through the SDK's real serializer and deserializer. State
// is kept in memory. Tests add long-term records with [Server.AddRecord],
// as AgentCore's strategies would some time after the events, read what
// was mirrored with [Server.Events], and inject faults with
// [Server.FailNext].
//
// # Usage
//
//	srv := agentcoretest.NewServer() // one memory, MemoryID
//	defer srv.Close()
//	client := srv.Client() // *bedrockagentcore.Client, retries off
//	srv.AddRecord(agentcoretest.MemoryID, agentcoretest.Record{
//		Namespaces: []string{"/users/a1/preferences"}, Text: "Prefers tea"})
//	// … run the code under test with client …
//	events := srv.Events(agentcoretest.MemoryID, "a1", "s1")
//
// # Operations
//
// CreateEvent (201), ListEvents, DeleteEvent, RetrieveMemoryRecords,
// ListMemoryRecords, GetMemoryRecord and BatchDeleteMemoryRecords, on the
// paths and methods of the SDK's model. A refusal is an HTTP status, the code in
// X-Amzn-Errortype and {"message", ...} in the body, from which the SDK
// builds its typed errors (*types.ValidationException with its Reason,
// *types.ResourceNotFoundException, ...).
//
// # Rules enforced
//
// From the API reference; every one is tested through the SDK client,
// with the SDK's own check of required members taken out where it would
// refuse first.
//
//   - Requests carry a SigV4 Authorization header scoped to
//     bedrock-agentcore, and X-Amz-Date: otherwise 403, as awstest checks.
//   - memoryId is at least 12 characters of
//     [a-zA-Z][a-zA-Z0-9-_]{0,99}-[a-zA-Z0-9]{10} (ARNs are not accepted),
//     else 400 ValidationException; a memory not added is 404
//     ResourceNotFoundException.
//   - actorId is 1 to 255 characters of [a-zA-Z0-9][a-zA-Z0-9-_/]*, and
//     sessionId 1 to 100 of [a-zA-Z0-9][a-zA-Z0-9-_]*, in every operation.
//     CreateEvent's page now also allows colons between actorId segments;
//     the stand-in keeps the stricter pattern of the other operations.
//   - CreateEvent needs actorId, eventTimestamp and payload (the SDK checks
//     these too), and sessionId, which the model leaves optional: the
//     service's answer without one is not documented. The payload has at
//     most 100 members, each with exactly one of conversational, blob and
//     json; a conversational text is 1 to 9000 characters and its role one
//     of ASSISTANT, USER, TOOL, OTHER. metadata has at most 15 keys of 1
//     to 128 characters of [a-zA-Z0-9\s._:/=+@-]. extractionMode is SKIP
//     or absent.
//   - clientToken makes CreateEvent idempotent per memory: the same token
//     with the same request (every member but the token) answers the
//     first event again and stores nothing; with another request it is 400
//     ValidationException, reason IdempotentParameterMismatchException. The
//     SDK makes a token when none is given and writes it into the input,
//     so an input sent twice is one event.
//   - maxResults is 1 to 100 (default 20) in the three paged operations; a
//     page ends with a nextToken while items remain; a nextToken this server
//     did not hand out for the same operation and request is 400
//     ValidationException.
//   - ListEvents lists one actor's session in eventTimestamp order, then
//     creation order (AgentCore documents no order; callers should not rely
//     on one); includePayloads false answers each event with an empty
//     payload. DeleteEvent needs an eventId of [0-9]+#[a-fA-F0-9]+ (which
//     the ids it makes are) and answers 404 for an event not in that
//     session.
//   - RetrieveMemoryRecords needs searchCriteria.searchQuery (1 to 10000
//     characters); topK is 1 to 100 (default 10) and bounds the hits before
//     paging; memoryStrategyId filters. Either namespace or namespacePath
//     is required (1 to 1024 characters), as for ListMemoryRecords.
//     namespace is an exact namespace, as the SDK's documentation states
//     it (the web reference has called it a prefix: the stricter reading
//     cannot make a test pass that the service would fail); namespacePath
//     takes every namespace under it, whole segments only.
//   - Relevance is deterministic, not semantic: the score is the share of
//     the query's words (lower-cased runs of letters and digits) that the
//     record's text has. Records with no word in common are not returned;
//     ties go to the newest record.
//   - GetMemoryRecord answers 404 ResourceNotFoundException for a record
//     the memory does not have.
//   - BatchDeleteMemoryRecords needs records, each with a memoryRecordId;
//     an unknown id is a failed record (status FAILED, errorCode 404), not
//     an error.
//
// # Faults
//
// [Server.FailNext] answers the next requests for an operation with 429
// ThrottledException (the memory operations' throttling error), 429
// ThrottlingException, 503 ServiceUnavailableException or 500
// ServiceException, before reading them, so they change nothing.
// [Server.SetHook] sees each request before it is served, to hold or
// delay it, or to answer one of those faults for as long as a test
// wants; a request whose client went away meanwhile is dropped unserved.
//
// # Not modeled
//
// Other operations are 404 UnknownOperationException. ListEvents filters
// and metadata filters are refused with a ValidationException of ours.
// Branches are stored and returned but not interpreted. There is no
// extraction: records exist only through AddRecord. No quotas, rate
// limits (but FailNext), blob size limits (none documented), eventual
// consistency, KMS, AccessDenied or ServiceQuotaExceeded.
package agentcoretest

// Package ssmtest is a stand-in for AWS Systems Manager Parameter Store's
// read operations: an HTTP server on a loopback port that speaks SSM's wire
// protocol (awsJson1_1), so the real ssm SDK client reaches it through
// BaseEndpoint or AWS_ENDPOINT_URL_SSM and every call goes through the SDK's
// real serializer and deserializer. Tests seed parameters with [Server.Put]
// and count reads with [Server.Calls], for example to prove that MCP server
// headers are read once, at init.
//
// # Usage
//
//	srv := ssmtest.NewServer()
//	defer srv.Close()
//	srv.Put("/agent/mcp/token", "s3cret", true) // a SecureString
//	client := srv.Client() // *ssm.Client, retries off
//	// … run the code under test with client …
//	if srv.Calls() != 1 { /* read more than once */ }
//
// # Wire protocol
//
// POST / with Content-Type application/x-amz-json-1.1 and the operation in
// X-Amz-Target: AmazonSSM.GetParameter, AmazonSSM.GetParameters or
// AmazonSSM.GetParametersByPath. A success is 200 with {"Parameter":
// {"ARN", "DataType": "text", "LastModifiedDate", "Name", "Type", "Value",
// "Version"}} (GetParameters: {"Parameters": [...] in name order,
// "InvalidParameters": [...]}; GetParametersByPath: {"Parameters": [...],
// "NextToken"?}). A refusal is 400 (403 for signature errors) with
// {"__type": code, ...} in the body, from which the SDK builds its typed
// errors (*types.ParameterNotFound, …).
//
// # Rules enforced
//
//   - Requests carry a SigV4 Authorization header scoped to the ssm service,
//     and X-Amz-Date: otherwise 403 MissingAuthenticationTokenException,
//     IncompleteSignatureException or InvalidSignatureException. The shape is
//     checked, not the signature, which needs the secret key. The credential
//     scope's region is the region of the ARNs in answers.
//   - Name is required and at most 2048 characters; spaces around it are
//     removed, as SSM does. It is a parameter name or its full ARN
//     (arn:aws:ssm:REGION:ACCOUNT:parameter/NAME), optionally with
//     :version or :label. A name holds only letters, digits and . - _ /; a
//     name with / begins with / ("Parameter name must be a fully qualified
//     name.") and has no empty path segment; a name without / does not begin
//     with aws or ssm, whatever the case. Otherwise 400 ValidationException
//     with SSM's message ("Parameter name: can't be prefixed with "ssm"
//     (case-insensitive). If formed as a path, …"). GetParameters takes 1 to
//     10 names.
//   - An unknown name, an ARN of another account than [AccountID], or a
//     label is 400 ParameterNotFound, with no message, as SSM sends it; an
//     unknown version is 400 ParameterVersionNotFound. GetParameters lists
//     unknown names in InvalidParameters instead.
//   - GetParametersByPath lists the parameters directly under Path (with
//     Recursive, every one below it), with or without a slash at its end;
//     "/" is the root, under which are the names that begin with / and
//     have no other. Path is 1 to 2048 characters, a name's hierarchy of at
//     most 15 levels, otherwise 400 ValidationException. MaxResults is 1 to
//     10 (otherwise 400 ValidationException), 10 when unset. A page ends
//     with a NextToken while parameters remain; a NextToken that this
//     server did not hand out for the same Path and Recursive is 400
//     InvalidNextToken. The order is the order in which the parameters
//     were first put: SSM documents none. [Server.SetShortPages] makes
//     pages best-effort, as the API reference allows: at most one
//     parameter, and every other page none, with a NextToken all the same.
//   - A SecureString read without WithDecryption: true has for Value an
//     opaque base64 blob in place of the KMS ciphertext: it begins as KMS
//     ciphertexts do (AQICAH), is stable for one version of one parameter,
//     and never contains the plaintext. String values are returned as they
//     are; WithDecryption does not change them.
//
// # Not modeled
//
// Only the three read operations exist; other targets are 400
// UnknownOperationException. GetParametersByPath's ParameterFilters are
// refused (400 ValidationException, with a message of ssmtest's), and the
// message for a path of more than 15 levels is ssmtest's too. Parameters are seeded with Put, not
// PutParameter. There are no labels, StringList parameters, tiers, policies,
// KMS keys (so no InvalidKeyId or KMS access errors), shared parameters or
// throttling (ThrottlingException). An ARN's region is not checked. The
// Content-Type header is not checked.
//
// # Recording
//
// Every request that passes the signature check is recorded
// ([Server.Requests]) and counted ([Server.Calls]), refused or not.
package ssmtest

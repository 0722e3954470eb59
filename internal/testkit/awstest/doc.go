// Package awstest holds what the local AWS stand-ins (lambdatest,
// ssmtest) share: the SigV4 header check AWS makes before it reads a
// request, the error answer in the JSON protocols the SDK clients decode,
// and request ids. What differs between services and between error shapes,
// such as the spelling of the message member, is passed in by the caller
// rather than guessed here.
package awstest

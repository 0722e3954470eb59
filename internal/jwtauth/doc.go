// Package jwtauth verifies JSON Web Tokens the way API Gateway's JWT
// authorizer for HTTP APIs does, for the REST API, which has no such
// authorizer type: it is the Lambda TOKEN authorizer of the stack's REST
// API when the tokens' issuer is not a Cognito user pool.
//
// A Verifier checks a token against one issuer and its audiences, by the
// rules API Gateway documents for its JWT authorizer:
//   - the token may come alone or after "Bearer ";
//   - it is signed with an RSA algorithm (RS256, RS384 or RS512) by a key
//     of the issuer's key set, found by the header's kid; the key set is
//     found through the issuer's OpenID Connect discovery document
//     (/.well-known/openid-configuration, its jwks_uri), fetched once and
//     kept for KeysTTL, and fetched again, at most every RefreshInterval,
//     when a token names a key it does not hold;
//   - iss is the issuer exactly;
//   - aud, when the token has one, names one of the audiences; a token
//     without aud must have a client_id that is one of them (as Cognito's
//     access tokens have);
//   - exp is after now, and nbf and iat, when present, are not after now.
//
// It also wants a subject (sub), which owns the caller's sessions: a token
// without one names nobody. A token that fails any check is refused with an
// error that wraps ErrInvalidToken; any other error means the issuer could
// not be asked, and the token is neither accepted nor refused.
//
// Handler answers API Gateway's TOKEN authorizer events with a Verifier.
package jwtauth

package a2a

import (
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// CardConfig is what the agent card says of the agent, from the
// configuration.
type CardConfig struct {
	Name        string
	Description string
	// Version is the agent's version, as the card gives it.
	Version string
	// Tools are the names of the main agent's tools, which its skill tags.
	Tools []string
	// Agents are the sub-agents the agent delegates to, each a skill.
	Agents []Skill
	// PublicURL, when set, is the JSON-RPC endpoint the card names (see
	// Card); else it is derived from the request.
	PublicURL string
}

// Skill is a skill of the agent's.
type Skill struct {
	Name, Description string
}

// Auth is how the request that fetched the card was authenticated, which
// the card says callers must do.
type Auth int

// The ways a card's callers authenticate.
const (
	// AuthNone: nothing, as the local run and an open URL take.
	AuthNone Auth = iota
	// AuthIAMLambda: SigV4 for the service lambda, through a function URL.
	AuthIAMLambda
	// AuthIAMAPIGateway: SigV4 for the service execute-api, through the
	// REST API.
	AuthIAMAPIGateway
	// AuthJWT: a bearer JWT from the issuer Card is given.
	AuthJWT
)

// chatSkill describes what a message does, and how a task that waits for
// a person is answered.
const chatSkill = "Send a message; the agent answers in the task's artifacts, the last of which is its answer, and in the status message of a completed task. " +
	"Send the next message of the conversation with the task's contextId. " +
	"A task may stop in TASK_STATE_INPUT_REQUIRED, when a tool call waits for a person's approval or the agent asks a question: " +
	"its status message lists the interrupts as a data part {\"interrupts\": [{\"id\", \"kind\", \"tool\", \"input\", \"reason\", ...}]}. " +
	"Answer them with a message on that taskId holding one data part {\"responses\": [{\"interrupt_id\": ID, \"approve\": true|false, \"message\"?} or {\"interrupt_id\": ID, \"answer\": TEXT}]}, " +
	"or, for a single question, text alone; CancelTask denies them instead."

// Card returns the agent card, whose JSON-RPC interface is at url, and
// whose security is what auth says: for AuthJWT, tokens of issuer, the
// issuer of the token the request for the card bore, which the API
// verified.
func (cc CardConfig) Card(url string, auth Auth, issuer string) *a2a.AgentCard {
	if cc.PublicURL != "" {
		url = cc.PublicURL
	}
	desc := cc.Description
	card := &a2a.AgentCard{
		Name:    cc.Name,
		Version: cc.Version,
		SupportedInterfaces: []*a2a.AgentInterface{
			{URL: url, ProtocolBinding: a2a.TransportProtocolJSONRPC, ProtocolVersion: a2a.Version},
		},
		Capabilities:       a2a.AgentCapabilities{Streaming: true},
		DefaultInputModes:  []string{"text/plain", "application/json", "image/png", "image/jpeg", "image/gif", "image/webp", "application/pdf"},
		DefaultOutputModes: []string{"text/plain", "application/json"},
		Skills: []a2a.AgentSkill{{
			ID: "chat", Name: "chat", Description: chatSkill, Tags: append([]string{"chat"}, cc.Tools...),
		}},
	}
	for _, s := range cc.Agents {
		card.Skills = append(card.Skills, a2a.AgentSkill{
			ID: "agent-" + s.Name, Name: s.Name, Tags: []string{"sub-agent"},
			Description: "A sub-agent the agent delegates to: " + s.Description,
		})
	}
	switch auth {
	case AuthIAMLambda:
		desc += " Requests must be signed with AWS Signature Version 4 for the service lambda, by a principal allowed lambda:InvokeFunctionUrl and lambda:InvokeFunction on the function."
	case AuthIAMAPIGateway:
		desc += " Requests must be signed with AWS Signature Version 4 for the service execute-api, by a principal allowed execute-api:Invoke on the API."
	case AuthJWT:
		scheme := a2a.SecuritySchemeName("jwt")
		card.SecuritySchemes = a2a.NamedSecuritySchemes{scheme: a2a.OpenIDConnectSecurityScheme{
			Description:      "A bearer JWT from the issuer, in the Authorization header.",
			OpenIDConnectURL: strings.TrimSuffix(issuer, "/") + "/.well-known/openid-configuration",
		}}
		card.SecurityRequirements = a2a.SecurityRequirementsOptions{{scheme: a2a.SecuritySchemeScopes{}}}
	}
	card.Description = strings.TrimSpace(desc)
	return card
}

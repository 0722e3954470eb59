package remote

import (
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/lambda-agent/lambda-agent/internal/agent"
)

// A2AOptions configure A2A. Zero values mean the documented defaults.
type A2AOptions struct {
	// Logger gets a warning for each agent left out, and why; nil means
	// slog.Default().
	Logger *slog.Logger
	// Credentials sign the requests of agents whose Auth is A2AAuthIAM:
	// the SDK config's. Without them, those agents are left out.
	Credentials aws.CredentialsProvider
	// Getenv reads AWS_LAMBDA_RUNTIME_API, whose address is refused, and
	// AWS_REGION, to sign for; nil means os.Getenv.
	Getenv func(string) string
	// TTL is how long a card is used before it is fetched again; 0 means
	// DefaultListTTL.
	TTL time.Duration
	// RetryAfter is how long an agent whose card could not be fetched or
	// used is left alone; 0 means DefaultRetryAfter.
	RetryAfter time.Duration
	// CardTimeout bounds one fetch of a card; 0 means DefaultListTimeout.
	CardTimeout time.Duration
	// Approval names the agents, by their tool names, whose every use
	// waits for a person's approval (agent.RequireApproval).
	Approval []string
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	// TLSConfig and Resolver are for tests, which serve agents with
	// httptest's certificates and names of their own: nil means the
	// system's roots and resolver.
	TLSConfig *tls.Config
	Resolver  *net.Resolver
}

// A2A is the remote agents of A2A_AGENTS, as an agent.ToolSet: a tool for
// each agent whose card was fetched and found safe to use. It is safe for
// concurrent use.
type A2A struct {
	agents []*a2aAgent
	opts   A2AOptions
}

var _ agent.ToolSet = (*A2A)(nil)

// NewA2A returns the tool set of agents, whose secret headers are resolved
// already (see ResolveA2ASecrets). It makes no request: Start, the first
// turn or Client fetches the cards. An agent that can never be used, its
// card URL the Lambda Runtime API, or its auth aws_iam without
// Credentials or a region, is left out now, with a warning.
func NewA2A(agents []A2AAgent, opts A2AOptions) *A2A {
	opts.Logger = cmp.Or(opts.Logger, slog.Default())
	if opts.Getenv == nil {
		opts.Getenv = os.Getenv
	}
	opts.TTL = cmp.Or(opts.TTL, DefaultListTTL)
	opts.RetryAfter = cmp.Or(opts.RetryAfter, DefaultRetryAfter)
	opts.CardTimeout = cmp.Or(opts.CardTimeout, DefaultListTimeout)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	set := &A2A{opts: opts}
	runtimeAPI := opts.Getenv("AWS_LAMBDA_RUNTIME_API")
	for _, cfg := range agents {
		a := &a2aAgent{cfg: cfg, set: set}
		set.agents = append(set.agents, a)
		u, err := parseCardURL(cfg.CardURL)
		if err == nil && cardIsRuntimeAPI(runtimeAPI, u) {
			err = fmt.Errorf("%s is the Lambda Runtime API: %w", cfg.CardURL, ErrForbiddenAddress)
		}
		var signer *iamSigner
		if err == nil && cfg.Auth == A2AAuthIAM {
			signer = &iamSigner{creds: opts.Credentials, signer: v4.NewSigner(), now: opts.Now}
			signer.region, err = signingRegion(u.Hostname(), opts.Getenv)
			if opts.Credentials == nil {
				err = fmt.Errorf("auth %s: no AWS credentials to sign with", A2AAuthIAM)
			}
		}
		if err != nil {
			a.broken = fmt.Errorf("A2A agent %s: %w", cfg.Name, err)
			opts.Logger.Warn("A2A agent left out", "agent", cfg.Name, "card_url", cfg.CardURL, "error", err.Error())
			continue
		}
		a.cardURL = u
		a.http = newA2AHTTPClient(u, cfg.Headers, signer, runtimeAPI, opts.TLSConfig, opts.Resolver)
	}
	return set
}

// Only returns the tool set of a's agents that are named names, sharing
// their cards and fetches with a.
func (a *A2A) Only(names ...string) *A2A {
	v := &A2A{opts: a.opts}
	for _, ag := range a.agents {
		if slices.Contains(names, ag.cfg.Name) {
			v.agents = append(v.agents, ag)
		}
	}
	return v
}

// Start fetches every agent's card in the background, so that the first
// turn finds them fetched, or being fetched.
func (a *A2A) Start() {
	for _, ag := range a.agents {
		ag.refresh()
	}
}

// Tools returns a tool for each agent whose card was fetched and found
// safe. A fetch that is due starts in the background; a turn waits for
// one, within ctx, only for an agent whose card was never fetched.
func (a *A2A) Tools(ctx context.Context) []agent.Tool {
	fetches := make([]<-chan struct{}, len(a.agents))
	for i, ag := range a.agents {
		fetches[i] = ag.refresh()
	}
	var out []agent.Tool
	for i, ag := range a.agents {
		c, _ := ag.current()
		if c == nil {
			select {
			case <-fetches[i]:
			case <-ctx.Done():
			}
			c, _ = ag.current()
		}
		if c != nil {
			out = append(out, ag.toolOf(c))
		}
	}
	return out
}

// Client returns the client of the agent named name, fetching its card
// first, within ctx, if it never was. The error names the agent.
func (a *A2A) Client(ctx context.Context, name string) (*A2AClient, error) {
	i := slices.IndexFunc(a.agents, func(ag *a2aAgent) bool { return ag.cfg.Name == name })
	if i < 0 {
		return nil, fmt.Errorf("no A2A agent is named %s", name)
	}
	ag := a.agents[i]
	fetch := ag.refresh()
	if c, _ := ag.current(); c != nil {
		return c, nil
	}
	select {
	case <-fetch:
	case <-ctx.Done():
		return nil, fmt.Errorf("A2A agent %s: %w", name, ctx.Err())
	}
	c, err := ag.current()
	if c == nil && err == nil {
		err = fmt.Errorf("A2A agent %s: its card is not fetched yet", name)
	}
	return c, err
}

// a2aAgent is one agent: its card as fetched last, made a client.
type a2aAgent struct {
	cfg     A2AAgent
	set     *A2A
	cardURL *url.URL
	http    *http.Client
	broken  error // why the agent can never be used; nil for none

	mu       sync.Mutex
	client   *A2AClient
	tool     agent.Tool    // client's
	err      error         // why the last fetch failed
	due      time.Time     // when the card is to be fetched again
	fetching chan struct{} // closed when the fetch under way ends
}

// refresh starts a fetch of the card if one is due and none is under way,
// and returns a channel closed when the fetch under way, if any, ends.
func (a *a2aAgent) refresh() <-chan struct{} {
	if a.broken != nil {
		return closed
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.fetching != nil:
		return a.fetching
	case a.set.opts.Now().Before(a.due):
		return closed
	}
	done := make(chan struct{})
	a.fetching = done
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), a.set.opts.CardTimeout)
		defer cancel()
		c, err := a.load(ctx)
		a.mu.Lock()
		defer a.mu.Unlock()
		a.fetching = nil
		if err != nil {
			a.err = fmt.Errorf("A2A agent %s: %w", a.cfg.Name, err)
			a.due = a.set.opts.Now().Add(a.set.opts.RetryAfter)
			a.set.opts.Logger.Warn("A2A agent unavailable", "agent", a.cfg.Name, "card_url", a.cfg.CardURL,
				"kept", a.client != nil, "error", err.Error())
			return
		}
		a.client, a.err, a.due = c, nil, a.set.opts.Now().Add(a.set.opts.TTL)
		a.tool = newA2ATool(c, a.set.opts.Approval)
	}()
	return done
}

// current returns the agent's client, if its card was fetched once, and
// why it cannot be used otherwise.
func (a *a2aAgent) current() (*A2AClient, error) {
	if a.broken != nil {
		return nil, a.broken
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.client, a.err
}

// tool returns the tool of c, made once per card.
func (a *a2aAgent) toolOf(c *A2AClient) agent.Tool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.tool != nil && a.client == c {
		return a.tool
	}
	return newA2ATool(c, a.set.opts.Approval)
}

// load fetches the card, checks it, and makes a client that calls the
// interface it picked, and no other.
func (a *a2aAgent) load(ctx context.Context) (*A2AClient, error) {
	card, err := fetchCard(ctx, a.http, a.cardURL.String())
	if err != nil {
		return nil, err
	}
	iface, err := pickInterface(card, a.cardURL)
	if err != nil {
		return nil, fmt.Errorf("card refused: %w", err)
	}
	safe := *card
	safe.SupportedInterfaces = []*a2a.AgentInterface{iface}
	sdk, err := a2aclient.NewFromCard(ctx, &safe, a2aclient.WithDefaultsDisabled(), a2aclient.WithJSONRPCTransport(a.http))
	if err != nil {
		return nil, fmt.Errorf("card refused: %w", err)
	}
	return &A2AClient{
		name:        a.cfg.Name,
		description: describe(a.cfg, card),
		streaming:   card.Capabilities.Streaming,
		timeout:     a.cfg.Timeout(),
		sdk:         sdk,
	}, nil
}

// a2aInput is the input of an agent's tool.
type a2aInput struct {
	Message string `json:"message"`
}

var a2aInputSchema = json.RawMessage(`{"type":"object","properties":{"message":{"type":"string","description":"The message to the agent, written for it: it sees nothing else of the conversation."}},"required":["message"]}`)

// a2aSchema is a2aInputSchema compiled, once, on first use.
var a2aSchema = sync.OnceValue(func() *agent.ToolSchema {
	s, err := agent.CompileToolSchema(a2aInputSchema)
	if err != nil {
		panic("remote: the A2A tools' input schema: " + err.Error()) // a constant: TestA2AToolSpec compiles it
	}
	return s
})

// A2ATool is the tool of a remote agent: the model's message goes to it,
// its answer comes back.
type A2ATool struct {
	client *A2AClient
	spec   agent.ToolSpec
}

var _ agent.CompiledTool = (*A2ATool)(nil)

func newA2ATool(c *A2AClient, approval []string) agent.Tool {
	var t agent.Tool = &A2ATool{client: c, spec: agent.ToolSpec{Name: c.name, Description: c.description, InputSchema: a2aInputSchema}}
	if slices.Contains(approval, c.name) {
		t = agent.RequireApproval(t)
	}
	return t
}

// Spec describes the tool: its name is the agent's in the configuration,
// its description the configured one or the card's.
func (t *A2ATool) Spec() agent.ToolSpec { return t.spec }

// CompiledSchema returns the input schema, compiled once for every agent.
func (t *A2ATool) CompiledSchema() *agent.ToolSchema { return a2aSchema() }

// Client returns the client the tool sends with.
func (t *A2ATool) Client() *A2AClient { return t.client }

// A2AConversation is what a session keeps of its conversation with a
// remote agent, in the agent's state under A2AStateKey: the remote
// context, so that the next call goes on with the same conversation, and
// the task that waits for input, which the next call answers.
type A2AConversation struct {
	ContextID string `json:"context_id"`
	TaskID    string `json:"task_id,omitempty"`
}

// A2AStateKey is the state key of the conversation with the remote agent
// named name.
func A2AStateKey(name string) string { return "a2a:" + name }

// maxRemoteID bounds a context or task id that a remote agent gives,
// which the session keeps: one past it, or not printable, is not kept.
const maxRemoteID = 256

// keepable reports whether a remote agent's id may be kept in a session.
func keepable(id string) bool {
	if id == "" || len(id) > maxRemoteID {
		return false
	}
	for _, r := range id {
		if r < 0x21 || r > 0x7e {
			return false
		}
	}
	return true
}

// Run sends the message, streaming when the card says the agent can, and
// returns the agent's answer. The message goes on with the conversation
// the session keeps with the agent (A2AConversation), and answers the
// task that waits for input, if one does. When the agent needs more, its
// question is the person's (agent.Ask): the turn pauses on it, and the
// answer goes to the agent (Answered), in whichever invocation resumes
// the turn. A failure, a timeout, or a task that failed, was rejected or
// canceled is an error naming the agent, which the model receives as an
// error result.
func (t *A2ATool) Run(ctx context.Context, call *agent.ToolCall) ([]agent.ToolResultContent, error) {
	var in a2aInput
	if err := json.Unmarshal(call.Input, &in); err != nil {
		return nil, fmt.Errorf("decode input: %w", err)
	}
	return t.send(ctx, call, in.Message)
}

// Answered sends the person's answer to the agent's question, in the task
// that asked it, which the session keeps; the agent's answer is the
// result, or its next question.
func (t *A2ATool) Answered(ctx context.Context, call *agent.ToolCall, answer string) ([]agent.ToolResultContent, error) {
	return t.send(ctx, call, answer)
}

var _ agent.Asker = (*A2ATool)(nil)

// send sends text to the agent, in the conversation the session keeps
// with it.
func (t *A2ATool) send(ctx context.Context, call *agent.ToolCall, text string) ([]agent.ToolResultContent, error) {
	name := t.client.name
	var conv A2AConversation
	if call.State != nil {
		if _, err := call.State.Get(A2AStateKey(name), &conv); err != nil {
			conv = A2AConversation{} // a value the session cannot read starts afresh
		}
	}
	in := SendInput{Text: text, ContextID: conv.ContextID, TaskID: conv.TaskID}
	var out *A2AOutcome
	var err error
	if t.client.streaming {
		// What the agent writes as it streams is the call's progress,
		// which a streamed turn shows.
		out, err = t.client.SendStreaming(ctx, in, call.Progress)
	} else {
		out, err = t.client.Send(ctx, in)
	}
	if call.State != nil {
		// The next call goes on in the context the agent answered in;
		// a task that waits is answered by it, and one that failed is
		// not sent to again.
		next := A2AConversation{ContextID: conv.ContextID}
		if err == nil && keepable(out.ContextID) {
			next.ContextID = out.ContextID
			if (out.State == a2a.TaskStateInputRequired || out.State == a2a.TaskStateAuthRequired) && keepable(string(out.TaskID)) {
				next.TaskID = string(out.TaskID)
			}
		}
		if next != conv {
			_ = call.State.Set(A2AStateKey(name), next) // a full state only loses the thread, not the answer
		}
	}
	if err != nil {
		return nil, err
	}
	var answer string
	switch out.State {
	case a2a.TaskStateCompleted:
		answer = cmp.Or(out.Text, fmt.Sprintf("The agent %s finished without an answer.", name))
	case a2a.TaskStateInputRequired:
		// The person answers, and the turn waits for it.
		return nil, agent.Ask(fmt.Sprintf("The agent %s asks: %s", name, cmp.Or(out.Question, "(it did not say what it needs)")))
	case a2a.TaskStateAuthRequired:
		answer = fmt.Sprintf("The agent %s needs an authorization this agent cannot give: %s", name, cmp.Or(out.Question, "(it did not say which)"))
	case a2a.TaskStateFailed, a2a.TaskStateRejected, a2a.TaskStateCanceled:
		return nil, fmt.Errorf("A2A agent %s: the task ended %s: %s", name, stateWord(out.State), cmp.Or(out.Text, "without a reason"))
	default:
		answer = fmt.Sprintf("The agent %s has not finished (its task is %s): %s", name, stateWord(out.State), cmp.Or(out.Text, "no answer yet"))
	}
	return []agent.ToolResultContent{{Text: answer}}, nil
}

// stateWord is a task state as a word: failed, input required.
func stateWord(s a2a.TaskState) string {
	return strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(s.String(), "TASK_STATE_"), "_", " "))
}

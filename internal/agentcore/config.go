package agentcore

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/bedrockagentcore"
	"github.com/lambda-agent/lambda-agent/internal/memory"
)

// API is what the package needs of the AgentCore data plane:
// *bedrockagentcore.Client.
type API interface {
	CreateEvent(context.Context, *bedrockagentcore.CreateEventInput, ...func(*bedrockagentcore.Options)) (*bedrockagentcore.CreateEventOutput, error)
	ListEvents(context.Context, *bedrockagentcore.ListEventsInput, ...func(*bedrockagentcore.Options)) (*bedrockagentcore.ListEventsOutput, error)
	DeleteEvent(context.Context, *bedrockagentcore.DeleteEventInput, ...func(*bedrockagentcore.Options)) (*bedrockagentcore.DeleteEventOutput, error)
	RetrieveMemoryRecords(context.Context, *bedrockagentcore.RetrieveMemoryRecordsInput, ...func(*bedrockagentcore.Options)) (*bedrockagentcore.RetrieveMemoryRecordsOutput, error)
	ListMemoryRecords(context.Context, *bedrockagentcore.ListMemoryRecordsInput, ...func(*bedrockagentcore.Options)) (*bedrockagentcore.ListMemoryRecordsOutput, error)
	GetMemoryRecord(context.Context, *bedrockagentcore.GetMemoryRecordInput, ...func(*bedrockagentcore.Options)) (*bedrockagentcore.GetMemoryRecordOutput, error)
	BatchDeleteMemoryRecords(context.Context, *bedrockagentcore.BatchDeleteMemoryRecordsInput, ...func(*bedrockagentcore.Options)) (*bedrockagentcore.BatchDeleteMemoryRecordsOutput, error)
}

var _ API = (*bedrockagentcore.Client)(nil)

// Owners says which owners have memory, and marks a forget-all:
// *memory.Store, whose rule for owners is the built-in memory's.
type Owners interface {
	Has(owner string) bool
	MarkForgotten(ctx context.Context, owner string) (int64, error)
}

var _ Owners = (*memory.Store)(nil)

// Config configures AgentCore Memory. Zero values mean the documented
// defaults.
type Config struct {
	// MemoryID is the AgentCore Memory resource's id. Required.
	MemoryID string
	// Namespace is where an owner's long-term records are: a namespace
	// path with ActorPlaceholder once, which becomes the owner's actorId.
	// The strategies of the memory must write under it. DefaultNamespace
	// when empty.
	Namespace string
	// RecallBytes bounds what a recall gives a turn, as for the built-in
	// memory; memory.DefaultRecallBytes when 0.
	RecallBytes int
	// TopK is how many records a recall asks for; DefaultTopK when 0.
	TopK int
	// RecallTimeout bounds a recall, retries included: a turn goes on
	// without memory rather than wait. DefaultRecallTimeout when 0.
	RecallTimeout time.Duration
}

// Defaults of Config.
const (
	DefaultNamespace     = "/users/" + ActorPlaceholder
	DefaultTopK          = 10
	DefaultRecallTimeout = 2 * time.Second
)

// ActorPlaceholder is where a namespace takes the owner's actorId, as
// AgentCore's strategies write it in theirs.
const ActorPlaceholder = "{actorId}"

// Limits of the API reference.
const (
	maxNamespace   = 1024
	maxSearchQuery = 10000 // characters
	maxText        = 9000  // characters of a conversational payload
	maxPayload     = 100   // members of an event's payload
	maxResults     = 100   // of a page
)

// memoryIDPattern is a memoryId, [a-zA-Z][a-zA-Z0-9-_]{0,99}-[a-zA-Z0-9]{10}
// with the length checked apart (CheckMemoryID): a counted repetition
// compiles to a program whose size costs the functions' cold start.
var memoryIDPattern = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9-_]*-[a-zA-Z0-9]{10}$`)

// CheckMemoryID returns an error unless id is an AgentCore memoryId.
func CheckMemoryID(id string) error {
	if len(id) < 12 || len(id) > 111 || !memoryIDPattern.MatchString(id) {
		return fmt.Errorf("%q is not an AgentCore memory id (such as myagent_memory-AbCdE01234; not an ARN)", id)
	}
	return nil
}

// CheckNamespace returns an error unless ns is a namespace path an owner's
// records can be found under: it starts with "/", has ActorPlaceholder
// once and no other placeholder, and fits AgentCore's length once the
// actorId is in it.
func CheckNamespace(ns string) error {
	switch {
	case !strings.HasPrefix(ns, "/"):
		return fmt.Errorf("namespace %q must start with /", ns)
	case strings.Count(ns, ActorPlaceholder) != 1:
		return fmt.Errorf("namespace %q must have %s once, which becomes the owner's actorId", ns, ActorPlaceholder)
	case strings.ContainsAny(strings.Replace(ns, ActorPlaceholder, "", 1), "{} \t\r\n"):
		return fmt.Errorf("namespace %q may have no placeholder but %s, and no white space", ns, ActorPlaceholder)
	case len(ns)-len(ActorPlaceholder)+IDLength > maxNamespace:
		return fmt.Errorf("namespace %q is too long", ns)
	}
	return nil
}

func (c *Config) check() error {
	if err := CheckMemoryID(c.MemoryID); err != nil {
		return err
	}
	if c.Namespace == "" {
		c.Namespace = DefaultNamespace
	}
	if err := CheckNamespace(c.Namespace); err != nil {
		return err
	}
	if c.RecallBytes == 0 {
		c.RecallBytes = memory.DefaultRecallBytes
	}
	if c.RecallBytes < 0 || c.RecallBytes > 16<<10 {
		return fmt.Errorf("RecallBytes %d is not between 1 and 16384", c.RecallBytes)
	}
	if c.TopK == 0 {
		c.TopK = DefaultTopK
	}
	if c.TopK < 1 || c.TopK > maxResults {
		return fmt.Errorf("TopK %d is not between 1 and %d", c.TopK, maxResults)
	}
	if c.RecallTimeout == 0 {
		c.RecallTimeout = DefaultRecallTimeout
	}
	if c.RecallTimeout < 0 {
		return errors.New("RecallTimeout is negative")
	}
	return nil
}

// NamespacePath is the namespace path of owner's records: Namespace with
// the owner's actorId in it.
func (c *Config) NamespacePath(owner string) string {
	return strings.Replace(c.Namespace, ActorPlaceholder, ActorID(owner), 1)
}

// under says whether the namespace ns is path or below it, whole segments
// only.
func under(ns, path string) bool {
	path = strings.TrimSuffix(path, "/")
	return ns == path || strings.HasPrefix(ns, path+"/")
}

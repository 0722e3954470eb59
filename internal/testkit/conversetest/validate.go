package conversetest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Limits Bedrock enforces on a Converse request. Sizes are of the decoded
// bytes; "MB" is read as MiB, the stricter plausible reading.
const (
	MaxImages        = 20
	MaxDocuments     = 5
	MaxImageBytes    = 3.75 * 1024 * 1024
	MaxDocumentBytes = 4.5 * 1024 * 1024
	// MaxCachePoints is how many cachePoint blocks a request may hold in
	// toolConfig.tools, system and messages together.
	MaxCachePoints = 4
)

// Messages Bedrock sends for misplaced cache points. Bedrock passes on the
// model's own words after "The model returned the following errors: ".
const (
	// Reported for Claude on Bedrock in
	// https://github.com/BerriAI/litellm/issues/16062.
	tooManyCachePointsFormat = "The model returned the following errors: A maximum of %d blocks with cache_control may be provided. Found %d."
	// Reported in https://github.com/anomalyco/opencode/issues/36517.
	cachePointAfterReasoning = "Cache point cannot be inserted after reasoning block. Please remove the invalid cache point and try again."
)

var (
	// docNameRE is Bedrock's rule for document names: alphanumerics, single
	// whitespace characters, hyphens, parentheses and square brackets. Note
	// that it forbids dots, so "report.pdf" is rejected.
	docNameRE = regexp.MustCompile(`^[a-zA-Z0-9\s\-()\[\]]+$`)
	doubleWS  = regexp.MustCompile(`\s\s`)

	imageFormats = map[string]bool{"png": true, "jpeg": true, "gif": true, "webp": true}
	docFormats   = map[string]bool{
		"pdf": true, "csv": true, "doc": true, "docx": true, "xls": true,
		"xlsx": true, "html": true, "txt": true, "md": true,
	}

	// bedrockContentMembers are ContentBlock members Bedrock knows but this
	// package does not model; a block holding one of them is accepted.
	bedrockContentMembers = map[string]bool{
		"video": true, "audio": true, "citationsContent": true,
		"searchResult": true, "toolAddition": true, "toolRemoval": true,
	}
	bedrockToolResultMembers = map[string]bool{"video": true, "searchResult": true}
)

// Validate checks req against the message rules Bedrock enforces and
// returns the first violation as a *[APIError] with status 400 and code
// ValidationException, or nil if there is none.
//
// The checks are those of the package documentation. The message names the
// offending element by its JSON path, for example
// "messages[3]: roles must alternate: two consecutive user messages".
func Validate(req *Request) error {
	if e := validate(req); e != nil {
		return e
	}
	return nil
}

// validate is Validate with a concrete result type.
func validate(req *Request) *APIError {
	v := validator{}
	v.request(req)
	if len(v.violations) == 0 {
		return nil
	}
	return validationError(v.violations[0])
}

func validationError(msg string) *APIError {
	return &APIError{Status: http.StatusBadRequest, Code: CodeValidation, Message: msg}
}

// path names an element of the request, such as
// messages[3].content[1].toolUse. It is a chain of values on the stack and
// is rendered only when a violation is reported: building the string for
// every block would dominate the cost of validating a valid request.
//
// A child points at its parent, so never store a child in its parent's
// variable (p = p.dot(…) makes a cycle); use a new variable.
type path struct {
	parent *path
	name   string // member name; "" for a list element
	index  int
}

func root(name string) path { return path{name: name} }

// at returns the path of p's i-th element.
func (p *path) at(i int) path { return path{parent: p, index: i} }

// dot returns the path of p's member name.
func (p *path) dot(name string) path { return path{parent: p, name: name} }

func (p *path) String() string {
	var b strings.Builder
	p.write(&b)
	return b.String()
}

func (p *path) write(b *strings.Builder) {
	if p.parent != nil {
		p.parent.write(b)
	}
	switch {
	case p.name == "":
		b.WriteByte('[')
		b.WriteString(strconv.Itoa(p.index))
		b.WriteByte(']')
	case p.parent != nil:
		b.WriteByte('.')
		b.WriteString(p.name)
	default:
		b.WriteString(p.name)
	}
}

// validator collects every violation it finds; callers report the first.
// Collecting all keeps the checks independent of each other.
type validator struct {
	violations []string
}

// add records the violation "<p>: <formatted message>".
func (v *validator) add(p *path, format string, args ...any) {
	v.violations = append(v.violations, p.String()+": "+fmt.Sprintf(format, args...))
}

// counts tallies what the limits apply to across the whole request.
type counts struct {
	images, documents int
	toolBlocks        bool
}

func (v *validator) request(req *Request) {
	if req.ModelID == "" {
		p := root("modelId")
		v.add(&p, "must not be empty")
	}
	msgs := root("messages")
	if len(req.Messages) == 0 {
		v.add(&msgs, "must not be empty")
	}
	var c counts
	v.messages(&msgs, req.Messages, &c)
	if c.images > MaxImages {
		v.add(&msgs, "%d images in the request, at most %d are allowed", c.images, MaxImages)
	}
	if c.documents > MaxDocuments {
		v.add(&msgs, "%d documents in the request, at most %d are allowed", c.documents, MaxDocuments)
	}
	system := root("system")
	for i := range req.System {
		p := system.at(i)
		v.system(&p, &req.System[i])
	}
	v.inference(req.InferenceConfig)
	if c.toolBlocks && req.ToolConfig == nil {
		p := root("toolConfig")
		v.add(&p, "must be present when messages contain toolUse or toolResult blocks")
	}
	v.tools(req.ToolConfig)
	v.guardrail(req.GuardrailConfig)
	v.cachePoints(req)
}

// cachePoints applies the rules that span every cache point of req, taken
// in Bedrock's order (tools, system, messages): there are at most
// [MaxCachePoints], and a one-hour point never follows a five-minute one
// (Anthropic's rule, which Bedrock passes on for Claude).
func (v *validator) cachePoints(req *Request) {
	n, fiveMinutes := 0, false
	visit := func(p *path, cp *CachePointBlock) {
		n++
		switch cp.TTL {
		case "1h":
			if fiveMinutes {
				v.add(p, "a cache point with ttl 1h must not come after one with ttl 5m (the order is tools, system, messages)")
			}
		case "", "5m":
			fiveMinutes = true
		}
	}
	if tc := req.ToolConfig; tc != nil {
		tcp := root("toolConfig")
		list := tcp.dot("tools")
		for i := range tc.Tools {
			if cp := tc.Tools[i].CachePoint; cp != nil {
				tp := list.at(i)
				p := tp.dot("cachePoint")
				visit(&p, cp)
			}
		}
	}
	system := root("system")
	for i := range req.System {
		if cp := req.System[i].CachePoint; cp != nil {
			sp := system.at(i)
			p := sp.dot("cachePoint")
			visit(&p, cp)
		}
	}
	msgs := root("messages")
	for i := range req.Messages {
		mp := msgs.at(i)
		content := mp.dot("content")
		for j := range req.Messages[i].Content {
			if cp := req.Messages[i].Content[j].CachePoint; cp != nil {
				bp := content.at(j)
				p := bp.dot("cachePoint")
				visit(&p, cp)
			}
		}
	}
	if n > MaxCachePoints {
		// Bedrock's words name no element, so no path either.
		v.violations = append(v.violations, fmt.Sprintf(tooManyCachePointsFormat, MaxCachePoints, n))
	}
}

func (v *validator) messages(msgs *path, list []Message, c *counts) {
	type position struct{ msg, block int }
	var toolUseAt map[string]position // Made on the first toolUse.
	for i := range list {
		m := &list[i]
		mp := msgs.at(i)
		switch {
		case m.Role != "user" && m.Role != "assistant":
			v.add(&mp, "role %q is not user or assistant", m.Role)
		case i == 0 && m.Role != "user":
			v.add(&mp, "the conversation must start with a user message, got %s", m.Role)
		case i > 0 && m.Role == list[i-1].Role:
			v.add(&mp, "roles must alternate: two consecutive %s messages", m.Role)
		}
		content := mp.dot("content")
		if len(m.Content) == 0 {
			v.add(&mp, "content must not be empty")
		}
		hasText, docAt, points := false, -1, 0
		for j := range m.Content {
			b := &m.Content[j]
			bp := content.at(j)
			v.contentBlock(&bp, m.Role, b, c)
			if b.Text != "" {
				hasText = true
			}
			if b.CachePoint != nil {
				points++
				if j > 0 && m.Content[j-1].ReasoningContent != nil {
					v.add(&bp, "%s", cachePointAfterReasoning)
				}
			}
			if b.Document != nil && docAt < 0 {
				docAt = j
			}
			if u := b.ToolUse; u != nil && u.ToolUseID != "" {
				if first, dup := toolUseAt[u.ToolUseID]; dup {
					parent := bp.dot("toolUse")
					p := parent.dot("toolUseId")
					v.add(&p, "duplicate id %q, first used at messages[%d].content[%d]", u.ToolUseID, first.msg, first.block)
				} else {
					if toolUseAt == nil {
						toolUseAt = make(map[string]position)
					}
					toolUseAt[u.ToolUseID] = position{i, j}
				}
			}
		}
		if points > 0 && points == len(m.Content) {
			// A cache point marks content; it is none itself.
			v.add(&mp, "content must hold a block other than cachePoint")
		}
		if docAt >= 0 && !hasText {
			p := content.at(docAt)
			v.add(&p, "a document block needs a text block in the same message")
		}
		if m.Role == "user" {
			var prev *Message
			if i > 0 && list[i-1].Role == "assistant" {
				prev = &list[i-1]
			}
			v.toolResults(&mp, m, i-1, prev)
		}
	}
	if n := len(list); n > 0 && list[n-1].Role != "user" {
		p := msgs.at(n - 1)
		v.add(&p, "the last message must be a user message (no prefill), got %s", list[n-1].Role)
	}
}

// toolResults checks that the user message m (at mp) answers exactly the
// toolUse blocks of prev, the assistant message right before it (nil if
// there is none). A turn has few tool calls, so slices beat maps here.
func (v *validator) toolResults(mp *path, m *Message, prevIndex int, prev *Message) {
	var want, answered []string
	if prev != nil {
		for _, b := range prev.Content {
			if b.ToolUse != nil {
				want = append(want, b.ToolUse.ToolUseID)
			}
		}
	}
	for j, b := range m.Content {
		r := b.ToolResult
		if r == nil {
			continue
		}
		switch {
		case !slices.Contains(want, r.ToolUseID):
			parent := mp.dot("content")
			p := parent.at(j)
			v.add(&p, "toolResult %q does not answer a toolUse of the preceding assistant message", r.ToolUseID)
		case slices.Contains(answered, r.ToolUseID):
			parent := mp.dot("content")
			p := parent.at(j)
			v.add(&p, "duplicate toolResult for toolUse %q", r.ToolUseID)
		}
		answered = append(answered, r.ToolUseID)
	}
	for k, id := range want {
		if !slices.Contains(answered, id) && !slices.Contains(want[:k], id) {
			v.add(mp, "toolUse %q of messages[%d] has no toolResult in this message", id, prevIndex)
		}
	}
}

func (v *validator) contentBlock(bp *path, role string, b *ContentBlock, c *counts) {
	var buf [4]string
	members := b.appendMembers(buf[:0])
	if !v.oneMember(bp, "content block", members) {
		return
	}
	if _, ok := b.Other["text"]; ok || isBlank(b.Text) {
		v.add(bp, "text must not be blank")
		return
	}
	switch {
	case b.Text != "":
		// Non-blank text is always fine.
	case b.Image != nil:
		c.images++
		if role != "user" {
			v.add(bp, "image blocks are only allowed in user messages")
		}
		p := bp.dot("image")
		v.image(&p, b.Image)
	case b.Document != nil:
		c.documents++
		if role != "user" {
			v.add(bp, "document blocks are only allowed in user messages")
		}
		p := bp.dot("document")
		v.document(&p, b.Document)
	case b.ToolUse != nil:
		c.toolBlocks = true
		if role != "assistant" {
			v.add(bp, "toolUse blocks are only allowed in assistant messages")
		}
		p := bp.dot("toolUse")
		v.toolUse(&p, b.ToolUse)
	case b.ToolResult != nil:
		c.toolBlocks = true
		if role != "user" {
			v.add(bp, "toolResult blocks are only allowed in user messages")
		}
		p := bp.dot("toolResult")
		v.toolResult(&p, b.ToolResult, c)
	case b.ReasoningContent != nil:
		if role != "assistant" {
			v.add(bp, "reasoningContent blocks are only allowed in assistant messages")
		}
		r := b.ReasoningContent
		var m []string
		if r.ReasoningText != nil {
			m = append(m, "reasoningText")
		}
		if r.RedactedContent != nil {
			m = append(m, "redactedContent")
		}
		p := bp.dot("reasoningContent")
		v.oneMember(&p, "reasoningContent", m)
	case b.CachePoint != nil:
		p := bp.dot("cachePoint")
		v.cachePoint(&p, b.CachePoint)
	case b.GuardContent != nil:
		// Recorded, not checked.
	default:
		if name := members[0]; !bedrockContentMembers[name] {
			v.add(bp, "unknown content block member %q", name)
		}
	}
}

// isBlank reports whether s is non-empty but only whitespace. (An empty
// text member never reaches a Text field; it is kept in Other.)
func isBlank(s string) bool {
	return s != "" && strings.TrimSpace(s) == ""
}

// oneMember reports whether members has exactly one element, recording a
// violation if not.
func (v *validator) oneMember(p *path, what string, members []string) bool {
	switch len(members) {
	case 1:
		return true
	case 0:
		v.add(p, "%s must have exactly one member set, got none", what)
	default:
		v.add(p, "%s must have exactly one member set, got %s", what, strings.Join(members, ", "))
	}
	return false
}

func (v *validator) image(ip *path, img *ImageBlock) {
	if !imageFormats[img.Format] {
		p := ip.dot("format")
		v.add(&p, "%q is not png, jpeg, gif or webp", img.Format)
	}
	s := img.Source
	source := ip.dot("source")
	bytesPath := source.dot("bytes")
	switch {
	case s.Bytes != nil && s.S3Location != nil:
		v.add(&source, "must have exactly one member set, got bytes, s3Location")
	case s.S3Location != nil:
		if s.S3Location.URI == "" {
			parent := source.dot("s3Location")
			p := parent.dot("uri")
			v.add(&p, "must not be empty")
		}
	case len(s.Bytes) == 0:
		v.add(&bytesPath, "must not be empty")
	case len(s.Bytes) > MaxImageBytes:
		v.add(&bytesPath, "image is %d bytes, at most %d are allowed", len(s.Bytes), int(MaxImageBytes))
	case imageFormats[img.Format]:
		if problem := imageProblem(img.Format, s.Bytes); problem != "" {
			v.add(&bytesPath, "%s", problem)
		}
	}
}

func (v *validator) document(dp *path, d *DocumentBlock) {
	format := dp.dot("format")
	if d.Format != "" && !docFormats[d.Format] {
		v.add(&format, "%q is not pdf, csv, doc, docx, xls, xlsx, html, txt or md", d.Format)
	}
	name := dp.dot("name")
	switch {
	case d.Name == "":
		v.add(&name, "must not be empty")
	case !docNameRE.MatchString(d.Name) || doubleWS.MatchString(d.Name):
		v.add(&name, "%q may only contain alphanumerics, single whitespace characters, hyphens, parentheses and square brackets", d.Name)
	}
	s := d.Source
	source := dp.dot("source")
	bytesPath := source.dot("bytes")
	var members []string
	if s.Bytes != nil {
		members = append(members, "bytes")
	}
	if s.S3Location != nil {
		members = append(members, "s3Location")
	}
	if s.Text != "" {
		members = append(members, "text")
	}
	if s.Content != nil {
		members = append(members, "content")
	}
	if len(members) == 0 {
		// An empty source is most likely empty bytes that were omitted.
		v.add(&bytesPath, "must not be empty")
		return
	}
	if !v.oneMember(&source, "source", members) {
		return
	}
	switch {
	case s.Bytes != nil && len(s.Bytes) == 0:
		v.add(&bytesPath, "must not be empty")
	case len(s.Bytes) > MaxDocumentBytes:
		v.add(&bytesPath, "document is %d bytes, at most %d are allowed", len(s.Bytes), int(MaxDocumentBytes))
	case isBlank(s.Text):
		p := source.dot("text")
		v.add(&p, "must not be blank")
	case s.Bytes != nil && docFormats[d.Format]:
		if problem := documentProblem(d.Format, s.Bytes); problem != "" {
			v.add(&bytesPath, "%s", problem)
		}
	}
	if s.Bytes != nil && d.Format == "" {
		v.add(&format, "must be set for a bytes source")
	}
}

func (v *validator) toolUse(up *path, u *ToolUseBlock) {
	if !isName(u.ToolUseID) {
		p := up.dot("toolUseId")
		v.add(&p, "%q does not match ^[a-zA-Z0-9_-]{1,64}$", u.ToolUseID)
	}
	if !isName(u.Name) {
		p := up.dot("name")
		v.add(&p, "%q does not match ^[a-zA-Z0-9_-]{1,64}$", u.Name)
	}
	if !isJSONObject(u.Input) {
		p := up.dot("input")
		v.add(&p, "must be a JSON object, got %s", describeJSON(u.Input))
	}
}

func (v *validator) toolResult(rp *path, r *ToolResultBlock, c *counts) {
	if r.ToolUseID == "" {
		p := rp.dot("toolUseId")
		v.add(&p, "must not be empty")
	}
	if r.Status != "" && r.Status != "success" && r.Status != "error" {
		p := rp.dot("status")
		v.add(&p, "%q is not success or error", r.Status)
	}
	content := rp.dot("content")
	if len(r.Content) == 0 {
		// Bedrock refuses a toolResult without content, whatever its
		// status ("The content field ... cannot be empty").
		v.add(&content, "must not be empty")
	}
	for k := range r.Content {
		rc := &r.Content[k]
		cp := content.at(k)
		var buf [4]string
		members := rc.appendMembers(buf[:0])
		if !v.oneMember(&cp, "toolResult content block", members) {
			continue
		}
		if _, ok := rc.Other["text"]; ok || isBlank(rc.Text) {
			v.add(&cp, "text must not be blank")
			continue
		}
		switch {
		case rc.Text != "", rc.JSON != nil:
			// Any JSON value is a valid document.
		case rc.Image != nil:
			c.images++
			p := cp.dot("image")
			v.image(&p, rc.Image)
		case rc.Document != nil:
			c.documents++
			p := cp.dot("document")
			v.document(&p, rc.Document)
		default:
			if name := members[0]; !bedrockToolResultMembers[name] {
				v.add(&cp, "unknown toolResult content member %q", name)
			}
		}
	}
}

func (v *validator) cachePoint(cp *path, point *CachePointBlock) {
	if point.Type != "default" {
		p := cp.dot("type")
		v.add(&p, "%q is not default", point.Type)
	}
	if t := point.TTL; t != "" && t != "5m" && t != "1h" {
		p := cp.dot("ttl")
		v.add(&p, "%q is not 5m or 1h", t)
	}
	for _, name := range appendOther(nil, point.Other) {
		v.add(cp, "unknown member %q", name)
	}
}

func (v *validator) system(sp *path, s *SystemBlock) {
	var buf [4]string
	members := s.appendMembers(buf[:0])
	if !v.oneMember(sp, "system block", members) {
		return
	}
	_, emptyText := s.Other["text"]
	switch {
	case emptyText || isBlank(s.Text):
		v.add(sp, "text must not be blank")
	case s.Text != "", s.GuardContent != nil:
	case s.CachePoint != nil:
		p := sp.dot("cachePoint")
		v.cachePoint(&p, s.CachePoint)
	default:
		v.add(sp, "unknown system block member %q", members[0])
	}
}

func (v *validator) inference(ic *InferenceConfig) {
	if ic == nil {
		return
	}
	ip := root("inferenceConfig")
	if ic.MaxTokens != nil && *ic.MaxTokens < 1 {
		p := ip.dot("maxTokens")
		v.add(&p, "%d is less than 1", *ic.MaxTokens)
	}
	if t := ic.Temperature; t != nil && !inUnit(*t) {
		p := ip.dot("temperature")
		v.add(&p, "%v is outside [0, 1]", *t)
	}
	if tp := ic.TopP; tp != nil && !inUnit(*tp) {
		p := ip.dot("topP")
		v.add(&p, "%v is outside [0, 1]", *tp)
	}
}

func inUnit(f float64) bool {
	return !math.IsNaN(f) && f >= 0 && f <= 1
}

func (v *validator) tools(tc *ToolConfig) {
	if tc == nil {
		return
	}
	tcp := root("toolConfig")
	list := tcp.dot("tools")
	if len(tc.Tools) == 0 {
		v.add(&list, "must not be empty")
	}
	var names []string // Declared tool names, in order.
	points := 0
	for i := range tc.Tools {
		t := &tc.Tools[i]
		tp := list.at(i)
		var members []string
		if t.ToolSpec != nil {
			members = append(members, "toolSpec")
		}
		if t.SystemTool != nil {
			members = append(members, "systemTool")
		}
		if t.CachePoint != nil {
			members = append(members, "cachePoint")
		}
		if !v.oneMember(&tp, "tool", members) {
			continue
		}
		if t.CachePoint != nil {
			points++
			p := tp.dot("cachePoint")
			v.cachePoint(&p, t.CachePoint)
		}
		spec := t.ToolSpec
		if spec == nil {
			continue
		}
		sp := tp.dot("toolSpec")
		name := sp.dot("name")
		if !isName(spec.Name) {
			v.add(&name, "%q does not match ^[a-zA-Z0-9_-]{1,64}$", spec.Name)
		}
		if first := slices.Index(names, spec.Name); first >= 0 {
			v.add(&name, "duplicate tool name %q, first declared at toolConfig.tools[%d]", spec.Name, first)
		}
		names = append(names, spec.Name)
		if !isJSONObject(spec.InputSchema.JSON) {
			parent := sp.dot("inputSchema")
			p := parent.dot("json")
			v.add(&p, "must be a JSON object, got %s", describeJSON(spec.InputSchema.JSON))
		}
	}
	if points > 0 && points == len(tc.Tools) {
		v.add(&list, "must hold a tool other than cachePoint")
	}
	tch := tc.ToolChoice
	if tch == nil {
		return
	}
	cp := tcp.dot("toolChoice")
	var members []string
	if tch.Auto != nil {
		members = append(members, "auto")
	}
	if tch.Any != nil {
		members = append(members, "any")
	}
	if tch.Tool != nil {
		members = append(members, "tool")
	}
	if !v.oneMember(&cp, "toolChoice", members) {
		return
	}
	if tch.Tool != nil && !slices.Contains(names, tch.Tool.Name) {
		parent := cp.dot("tool")
		p := parent.dot("name")
		v.add(&p, "%q is not among the tools", tch.Tool.Name)
	}
}

func (v *validator) guardrail(g *GuardrailConfig) {
	if g == nil {
		return
	}
	gp := root("guardrailConfig")
	if g.GuardrailIdentifier == "" {
		p := gp.dot("guardrailIdentifier")
		v.add(&p, "must not be empty")
	}
	if g.GuardrailVersion == "" {
		p := gp.dot("guardrailVersion")
		v.add(&p, "must not be empty")
	}
	if g.Trace != "" && g.Trace != "enabled" && g.Trace != "disabled" && g.Trace != "enabled_full" {
		p := gp.dot("trace")
		v.add(&p, "%q is not enabled, disabled or enabled_full", g.Trace)
	}
	if m := g.StreamProcessingMode; m != "" && m != "sync" && m != "async" {
		p := gp.dot("streamProcessingMode")
		v.add(&p, "%q is not sync or async", m)
	}
}

// isName reports whether s matches ^[a-zA-Z0-9_-]{1,64}$, the pattern of
// tool names and toolUse ids.
func isName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// isJSONObject reports whether raw is a JSON object.
func isJSONObject(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{'
}

// describeJSON names the kind of JSON value in raw, for messages.
func describeJSON(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 'n':
		return "null"
	case 't', 'f':
		return "a boolean"
	default:
		return "a number"
	}
}

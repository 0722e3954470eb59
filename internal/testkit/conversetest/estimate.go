package conversetest

// ImageInputBytes is what one image adds to [EstimateInputBytes]: 6400
// bytes, about 1600 tokens, roughly what Claude charges for a one-megapixel
// image. A flat amount keeps estimates predictable; the encoded size of an
// image says little about its token cost.
const ImageInputBytes = 6400

// EstimateInputBytes estimates the prompt size of req in bytes. The server
// compares it with [Server.MaxInputBytes] and divides it by four (about four
// bytes per token) for the reported input tokens.
//
// It is the sum over the system blocks and the messages of: text lengths;
// toolUse name and input lengths; toolResult text and json lengths;
// reasoning text lengths; document sizes (bytes or text source); and
// [ImageInputBytes] per image. Tool specs and inference settings are not
// counted, so a test can reason about the estimate from the conversation
// alone.
func EstimateInputBytes(req *Request) int {
	n := 0
	for _, s := range req.System {
		n += len(s.Text)
	}
	for _, m := range req.Messages {
		n += contentBytes(m.Content)
	}
	return n
}

// contentBytes estimates the size of blocks as EstimateInputBytes does.
func contentBytes(blocks []ContentBlock) int {
	n := 0
	for _, b := range blocks {
		n += len(b.Text)
		if b.Image != nil {
			n += ImageInputBytes
		}
		if b.Document != nil {
			n += documentBytes(b.Document)
		}
		if u := b.ToolUse; u != nil {
			n += len(u.Name) + len(u.Input)
		}
		if r := b.ToolResult; r != nil {
			for _, c := range r.Content {
				n += len(c.Text) + len(c.JSON)
				if c.Image != nil {
					n += ImageInputBytes
				}
				if c.Document != nil {
					n += documentBytes(c.Document)
				}
			}
		}
		if r := b.ReasoningContent; r != nil && r.ReasoningText != nil {
			n += len(r.ReasoningText.Text)
		}
	}
	return n
}

func documentBytes(d *DocumentBlock) int {
	return len(d.Source.Bytes) + len(d.Source.Text)
}

// tokens converts a byte estimate to tokens: four bytes per token, and at
// least one token, as every real call uses some.
func tokens(bytes int) int {
	return max(1, bytes/4)
}

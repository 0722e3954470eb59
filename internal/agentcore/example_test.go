package agentcore_test

import (
	"fmt"

	"github.com/lambda-agent/lambda-agent/internal/agentcore"
)

func Example() {
	fmt.Println(agentcore.ActorID("iam:arn:aws:iam::123456789012:role/agent"))
	fmt.Println(agentcore.SessionID("chat-2025-06-01.a:1"))
	// Output:
	// o-lkvp2ikim4nxpi3yqqrnmtuu7a5gzr5zexm5lwponn5xf7tl2lmq
	// s-kbbg5ngpsywdoy53povhhwwcskliod6nj4o557d5htenyhoimzya
}

// Package tools holds the agent's built-in tools: calculator, current_time,
// remember and recall. The deployment enables them by name with ByName.
package tools

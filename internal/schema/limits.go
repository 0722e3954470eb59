package schema

import (
	"github.com/lambda-agent/lambda-agent/internal/schema/limits"
)

// The budget of a caller's schema: internal/schema/limits', which the
// agent's compiler of tools' input schemas holds them to as well. See there.
const (
	MaxBytes          = limits.MaxBytes
	MaxDepth          = limits.MaxDepth
	MaxSubschemas     = limits.MaxSubschemas
	MaxResources      = limits.MaxResources
	MaxBranches       = limits.MaxBranches
	MaxRefs           = limits.MaxRefs
	MaxExpanded       = limits.MaxExpanded
	MaxPatternSize    = limits.MaxPatternSize
	MaxNumberLength   = limits.MaxNumberLength
	MaxNumberExponent = limits.MaxNumberExponent
	MaxInstanceDepth  = limits.MaxInstanceDepth
	MaxSteps          = limits.MaxSteps
	MaxValidateTime   = limits.MaxValidateTime
)

// docURL is where the compiler keeps the schema: where the static checks
// resolve its resources.
const docURL = limits.DocURL

func checkNumber(n string) (reason, limit string) { return limits.CheckNumber(n) }

func patternSize(p string) int { return limits.PatternSize(p) }

var (
	pointer     = limits.Pointer
	shorten     = limits.Shorten
	jsonPointer = limits.JSONPointer
)

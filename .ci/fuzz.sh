#!/usr/bin/env bash
# Runs every fuzz target for a time budget: .ci/fuzz.sh 10s [REPORT.md]
# With a report file, writes each target's execution count between the
# "fuzz results" markers in it.
set -euo pipefail
cd "$(dirname "$0")/.."
budget=${1:-10s}
report=${2:-}
targets=(
	"./internal/httpapi FuzzChatBody"
	"./internal/httpapi FuzzEvent"
	"./internal/httpapi FuzzStreamBody"
	"./internal/httpapi FuzzAGUIBody"
	"./internal/httpapi FuzzA2ABody"
	"./internal/agent FuzzWindow"
	"./internal/agent FuzzToolSchema"
	"./internal/tools FuzzEval"
	"./internal/testkit/conversetest FuzzDecodeValidate"
	"./internal/schema FuzzCompile"
	"./internal/lambdahttp FuzzBodySize"
)
# fuzz PACKAGE TARGET runs one target for the budget. Minimizing each new
# input for Go's default minute would stall the targets whose executions are
# whole turns for most of a short budget.
fuzz() { go test -run='^$' -fuzz="^$2\$" -fuzztime="$budget" -fuzzminimizetime=200x "$1" 2>&1; }
rows=""
for t in "${targets[@]}"; do
	set -- $t
	echo "--- fuzz $2 ($1) for $budget"
	out=$(fuzz "$@") || {
		# Go 1.26's fuzzing coordinator can fail a target with a bare
		# "context deadline exceeded" as -fuzztime ends, having found
		# nothing (go.dev/issue/75804, fixed in Go 1.27). Such a run, which
		# wrote no failing input, is run once more; a finding fails at once.
		if ! grep -q '^    context deadline exceeded$' <<<"$out" || grep -q 'Failing input written' <<<"$out"; then
			echo "$out"
			exit 1
		fi
		echo "the fuzzing coordinator's deadline race (go.dev/issue/75804), with no failing input: once more"
		out=$(fuzz "$@") || { echo "$out"; exit 1; }
	}
	execs=$(echo "$out" | grep -o 'execs: [0-9]*' | tail -1 | grep -o '[0-9]*' || echo 0)
	echo "$execs executions, no failure"
	rows="$rows| \`$2\` | \`$1\` | $budget | $execs | 0 |\n"
done
if [ -n "$report" ]; then
	table=$(printf '%s\n\nLast run: %s, `.ci/fuzz.sh %s %s`.\n\n| target | package | budget | inputs tried | failures |\n|---|---|---|---|---|\n%b%s' \
		'<!-- fuzz results: begin -->' "$(date -u +%F)" "$budget" "$report" "$rows" '<!-- fuzz results: end -->')
	TABLE="$table" awk '
		/<!-- fuzz results: begin -->/ { print ENVIRON["TABLE"]; skip = 1; next }
		/<!-- fuzz results: end -->/ { skip = 0; next }
		!skip { print }
	' "$report" >"$report.tmp" && mv "$report.tmp" "$report"
fi

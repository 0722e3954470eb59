package offline

import (
	"errors"
	"strings"
	"testing"

	"github.com/lambda-agent/lambda-agent/internal/tools"
)

// exprTests are sentences and the expression the offline model sends to the
// calculator for each, or "" when it sends none.
var exprTests = []struct {
	text, want string
}{
	// Numbers: exponents, decimals, thousands separators.
	{"What is 1e308*10?", "1e308*10"},
	{"What is 25*48?", "25*48"},
	{"what's 1.5E-3 * 2e+2", "1.5E-3 * 2e+2"},
	{"Compute 6.02e23/1e3 please.", "6.02e23/1e3"},
	{"What is .5 + .25?", ".5 + .25"},
	{"What is 2.5*4.", "2.5*4"},
	{"How much is 1,000 * 3?", "1000 * 3"},
	{"1,234,567.5 - 0.5", "1234567.5 - 0.5"},
	{"In 2024, 3+4 is what?", "3+4"},
	// Unary signs.
	{"What is -5 + 3?", "-5 + 3"},
	{"What is 5 - -3?", "5 - -3"},
	{"and -2^2?", "-2^2"},
	{"What is 2^-1?", "2^-1"},
	{"+3 * +4", "+3 * +4"},
	// Operators, in every spelling the calculator reads.
	{"What is 2**10?", "2**10"},
	{"What is 10 % 3?", "10 % 3"},
	{"What is 6 × 7?", "6 × 7"},
	{"What is 84 ÷ 2?", "84 ÷ 2"},
	{"What is 9 − 4?", "9 − 4"},
	{"What is 2^3^2?", "2^3^2"},
	// Parentheses.
	{"What's (2.5 + 3) * 4^2?", "(2.5 + 3) * 4^2"},
	{"What is -(3+4)*2?", "-(3+4)*2"},
	{"What is ((1+2)*(3+4))/7?", "((1+2)*(3+4))/7"},
	{"Tell me (2+3)*4, please", "(2+3)*4"},
	{"Is it 8 (see 2+3) or not?", "2+3"},
	{"What is 2*(3+4", "2*(3+4"}, // left open: the calculator says so
	{"((2+3)", "(2+3)"},
	{"(2+3))", "(2+3)"},
	// The first expression when there are several; junk around them.
	{"Compute 2 + 3 and 4 * 5", "2 + 3"},
	{"I have 3 apples; what is 2+2?", "2+2"},
	{"2 + 2 = 4", "2 + 2"},
	{"Is 2024 2+2?", "2+2"},
	{"What is 2 * * 3 or 4/2?", "4/2"},
	{"7 -", ""},
	{"= * 3 + 1", "3 + 1"},
	{"What is 50% of 8?", ""},
	// Numbers in words are not arithmetic.
	{"What is 7?", ""},
	{"What is -7?", ""},
	{"Is mp3-2 a format?", ""},
	{"What is 3x4?", ""},
	{"Go 1.2.3 - 1", ""},
	{"well-known 5", ""},
	{"the 2nd+3rd", ""},
	{"What is 2e?", ""},
	{"Hello there", ""},
	{"", ""},
	{"()", ""},
	{"COVID-19 cases: 3+4", "3+4"},
	{"e-5+2", "5+2"},
}

func TestExpression(t *testing.T) {
	for _, tt := range exprTests {
		got, ok := expression(tt.text)
		if got != tt.want || ok != (tt.want != "") {
			t.Errorf("expression(%q) = %q, %v; want %q", tt.text, got, ok, tt.want)
		}
	}
}

// TestLongText: the extraction takes time in proportion to the text, which
// the user writes; a quadratic one would take minutes here.
func TestLongText(t *testing.T) {
	const n = 200_000
	for _, tt := range []struct{ text, want string }{
		{strings.Repeat("(", n) + "1+2", "1+2"},
		{"1+2" + strings.Repeat(")", n), "1+2"},
		{strings.Repeat("1+", n) + "?", strings.Repeat("1+", n-1) + "1"},
	} {
		if got, _ := expression(tt.text); got != tt.want {
			t.Errorf("expression of %d bytes = %.20q... (%d bytes)", len(tt.text), got, len(got))
		}
	}
}

// TestExpressionsAreTheCalculators checks that what the offline model sends
// is an expression in the calculator's grammar, except where a parenthesis
// was left open on purpose.
func TestExpressionsAreTheCalculators(t *testing.T) {
	for _, tt := range exprTests {
		expr, ok := expression(tt.text)
		if !ok || tt.text == "What is 2*(3+4" {
			continue
		}
		var se *tools.SyntaxError
		if _, err := tools.Eval(expr); errors.As(err, &se) {
			t.Errorf("expression(%q) = %q, which the calculator cannot parse: %v", tt.text, expr, err)
		}
	}
}

// FuzzExpression checks that whatever the text, the expression comes from
// it and has the calculator's form, but for a parenthesis left open.
func FuzzExpression(f *testing.F) {
	for _, tt := range exprTests {
		f.Add(tt.text)
	}
	f.Fuzz(func(t *testing.T, text string) {
		expr, ok := expression(text)
		if !ok {
			return
		}
		var se *tools.SyntaxError
		if _, err := tools.Eval(expr); errors.As(err, &se) && !unbalanced(expr) {
			t.Errorf("expression(%q) = %q: %v", text, expr, err)
		}
	})
}

// unbalanced reports whether expr has a parenthesis without its pair.
func unbalanced(expr string) bool {
	depth := 0
	for _, r := range expr {
		switch r {
		case '(':
			depth++
		case ')':
			depth--
			if depth < 0 {
				return true
			}
		}
	}
	return depth != 0
}

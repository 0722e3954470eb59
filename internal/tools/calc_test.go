package tools

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestEval(t *testing.T) {
	tests := []struct {
		expr string
		want float64
	}{
		// Numbers.
		{"42", 42},
		{"3.25", 3.25},
		{".5", 0.5},
		{"2.", 2},
		{"007", 7},
		{"1e3", 1000},
		{"2.5E-2", 0.025},
		{"1.5e+2", 150},
		{".5e1", 5},
		{"1e-400", 0}, // underflow rounds to zero, as in Go
		// Precedence and associativity.
		{"25*48", 1200},
		{"2+3*4", 14},
		{"(2+3)*4", 20},
		{"10-4-3", 3},
		{"100/10/5", 2},
		{"2*3%4", 2},
		{"1+2*3^2", 19},
		{"10/4", 2.5},
		{"1/3", 1.0 / 3},
		// Unary signs.
		{"-3", -3},
		{"+3", 3},
		{"--3", 3},
		{"---3", -3},
		{"-+-3", 3},
		{"2*-3", -6},
		{"2--3", 5},
		{"-(2+3)", -5},
		{"-0", 0},
		{"0*-1", 0},
		{strings.Repeat("-", 1000) + "1", 1}, // signs do not nest
		// Powers.
		{"2^10", 1024},
		{"2**10", 1024},
		{"-2^2", -4},
		{"(-2)^2", 4},
		{"2^-1", 0.5},
		{"2^3^2", 512},
		{"2**3**2", 512},
		{"(2^3)^2", 64},
		{"-2^-2", -0.25},
		{"2^0.5", math.Sqrt2},
		{"0^0", 1},
		{"(-8)^(1/3*3)", -8},
		// Remainder has the sign of the dividend.
		{"7%3", 1},
		{"-7%3", -1},
		{"7%-3", 1},
		{"-7%-3", -1},
		{"5.5%2", 1.5},
		{"-6%3", 0},
		// Unicode operators.
		{"6×7", 42},
		{"7÷2", 3.5},
		{"5−8", -3},
		{"−5", -5},
		{"3 × 4 ÷ 2 − 1", 5},
		// Whitespace.
		{"  1 +\t2\n* 3  ", 7},
		{"( 1 + 2 ) * 3", 9},
		{"2 ** 3", 8},
		{"1\u00a0+\u20032", 3}, // no-break and em spaces
		// Nesting.
		{"((((1+2))))*((3))", 9},
		{"(1+(2*(3+(4/(5-3)))))", 11},
		{strings.Repeat("(", MaxDepth) + "1" + strings.Repeat(")", MaxDepth), 1},
		{strings.Repeat("1^", MaxDepth) + "2", 1},
		// Large but finite.
		{"2^1023", 0x1p1023},
		{"1.7976931348623157e308", math.MaxFloat64},
	}
	for _, tc := range tests {
		t.Run(testName(tc.expr), func(t *testing.T) {
			got, err := Eval(tc.expr)
			if err != nil {
				t.Fatalf("Eval(%q) error: %v", tc.expr, err)
			}
			// The sign bit too: Eval never returns -0.
			if got != tc.want || math.Signbit(got) != math.Signbit(tc.want) {
				t.Errorf("Eval(%q) = %v, want %v", tc.expr, got, tc.want)
			}
		})
	}
}

func TestEvalErrors(t *testing.T) {
	tests := []struct {
		expr string
		want error
	}{
		{"1/0", ErrDivisionByZero},
		{"1÷0", ErrDivisionByZero},
		{"0/0", ErrDivisionByZero},
		{"5%0", ErrDivisionByZero},
		{"1/(2-2)", ErrDivisionByZero},
		{"0^-1", ErrDivisionByZero},
		{"10^400", ErrOverflow},
		{"1e400", ErrOverflow},
		{"1e308*10", ErrOverflow},
		{"-1e308-1e308", ErrOverflow},
		{"1/10^400", ErrOverflow}, // the intermediate overflows
		{"10^400-10^400", ErrOverflow},
		{"(-8)^(1/3)", ErrUndefined},
		{"(-1)^0.5", ErrUndefined},
		{strings.Repeat("1+", MaxExprLen/2) + "1", ErrTooLong},
		{strings.Repeat("(", MaxDepth+1) + "1" + strings.Repeat(")", MaxDepth+1), ErrTooDeep},
		{strings.Repeat("(", MaxExprLen), ErrTooDeep},
		{strings.Repeat("2^", MaxDepth+1) + "1", ErrTooDeep},
	}
	for _, tc := range tests {
		t.Run(testName(tc.expr), func(t *testing.T) {
			_, err := Eval(tc.expr)
			if !errors.Is(err, tc.want) {
				t.Errorf("Eval(%q) error = %v, want %v", tc.expr, err, tc.want)
			}
		})
	}
}

func TestEvalSyntaxErrors(t *testing.T) {
	tests := []struct {
		expr string
		want SyntaxError
	}{
		{"", SyntaxError{0, "empty expression"}},
		{" \t\n", SyntaxError{0, "empty expression"}},
		{"(1+)", SyntaxError{3, `unexpected ")"`}},
		{"1 + )", SyntaxError{4, `unexpected ")"`}},
		{"()", SyntaxError{1, `unexpected ")"`}},
		{"1+", SyntaxError{2, "unexpected end of expression"}},
		{"(1+2", SyntaxError{4, "unexpected end of expression"}},
		{"1+2)", SyntaxError{3, `unexpected ")"`}},
		{"2(3)", SyntaxError{1, `unexpected "("`}},
		{"1 2", SyntaxError{2, `unexpected number "2"`}},
		{"1.2.3", SyntaxError{3, `unexpected number ".3"`}},
		{"*2", SyntaxError{0, `unexpected "*"`}},
		{"2*/3", SyntaxError{2, `unexpected "/"`}},
		{"2^^3", SyntaxError{2, `unexpected "^"`}},
		{"2***3", SyntaxError{3, `unexpected "*"`}},
		{"2×÷3", SyntaxError{3, `unexpected "÷"`}},
		{".", SyntaxError{0, `malformed number "."`}},
		{"1+.e5", SyntaxError{2, `malformed number ".e5"`}},
		{"1 a", SyntaxError{2, `unknown character "a"`}},
		{"2 x 3", SyntaxError{2, `unknown character "x"`}},
		{"2e", SyntaxError{1, `unknown character "e"`}},
		{"1_000", SyntaxError{1, `unknown character "_"`}},
		{"3,5", SyntaxError{1, `unknown character ","`}},
		{"√4", SyntaxError{0, `unknown character "√"`}},
		{"1+\xff", SyntaxError{2, `unknown character "\xff"`}},
		{"1/0 +", SyntaxError{5, "unexpected end of expression"}}, // before the division by zero
	}
	for _, tc := range tests {
		t.Run(tc.expr, func(t *testing.T) {
			_, err := Eval(tc.expr)
			var got *SyntaxError
			if !errors.As(err, &got) {
				t.Fatalf("Eval(%q) error = %v, want a *SyntaxError", tc.expr, err)
			}
			if diff := cmp.Diff(tc.want, *got); diff != "" {
				t.Errorf("Eval(%q) error mismatch (-want +got):\n%s", tc.expr, diff)
			}
		})
	}
}

// testName shortens the generated expressions, which run to a kilobyte.
func testName(expr string) string {
	if len(expr) > 40 {
		return expr[:40] + "..."
	}
	return expr
}

func TestSyntaxErrorMessage(t *testing.T) {
	_, err := Eval("(1+)")
	got := err.Error()
	want := `calc: unexpected ")" at offset 3`
	if got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

// FuzzEval checks that Eval never panics, returns only finite values and
// classified errors, and agrees with Go on "a op b" for small integers.
func FuzzEval(f *testing.F) {
	seeds := []string{
		"25*48", "-2^2", "2^3^2", "2**-1", "--3", "7 % -3", "3 × 4 ÷ 2 − 1",
		".5+2.", "1e3", "2.5E-2", "1/0", "10^400", "(-8)^(1/3)", "((1))", "(1+)", "", "1 a",
	}
	for i, s := range seeds {
		f.Add(s, int16(i*7-50), int16(3-i), uint8(i))
	}
	f.Fuzz(func(t *testing.T, expr string, a, b int16, op uint8) {
		got, err := Eval(expr)
		checkResult(t, expr, got, err)
		if err == nil && len(expr)+2 <= MaxExprLen {
			// Parentheses around a whole expression change nothing.
			wrapped, err := Eval("(" + expr + ")")
			if err != nil && !errors.Is(err, ErrTooDeep) {
				t.Errorf("Eval(%q) error: %v, but Eval(%q) = %v", "("+expr+")", err, expr, got)
			}
			if err == nil && wrapped != got {
				t.Errorf("Eval(%q) = %v, but Eval(%q) = %v", "("+expr+")", wrapped, expr, got)
			}
		}

		ops := []string{"+", "-", "−", "*", "×", "/", "÷", "%", "^", "**"}
		sym := ops[int(op)%len(ops)]
		expr = fmt.Sprintf("%d %s %d", a, sym, b)
		got, err = Eval(expr)
		want, wantErr := binary(int64(a), sym, int64(b))
		if !errors.Is(err, wantErr) || got != want {
			t.Errorf("Eval(%q) = %v, %v; want %v, %v", expr, got, err, want, wantErr)
		}
	})
}

// checkResult fails t unless Eval's result is finite or its error is one
// that callers can classify.
func checkResult(t *testing.T, expr string, got float64, err error) {
	t.Helper()
	if err == nil {
		if math.IsNaN(got) || math.IsInf(got, 0) {
			t.Errorf("Eval(%q) = %v, want a finite value", expr, got)
		}
		return
	}
	if got != 0 {
		t.Errorf("Eval(%q) = %v with error %v, want 0", expr, got, err)
	}
	var se *SyntaxError
	if errors.As(err, &se) {
		if se.Offset < 0 || se.Offset > len(expr) {
			t.Errorf("Eval(%q) error offset %d outside the input", expr, se.Offset)
		}
		return
	}
	for _, known := range []error{ErrDivisionByZero, ErrOverflow, ErrUndefined, ErrTooLong, ErrTooDeep} {
		if errors.Is(err, known) {
			return
		}
	}
	t.Errorf("Eval(%q) error %v is not one of the documented kinds", expr, err)
}

// binary is the reference for FuzzEval: a sym b computed in Go. The integer
// operators use integer arithmetic, which is exact for int16 operands.
func binary(a int64, sym string, b int64) (float64, error) {
	switch sym {
	case "+":
		return float64(a + b), nil
	case "-", "−":
		return float64(a - b), nil
	case "*", "×":
		return float64(a * b), nil
	case "/", "÷":
		if b == 0 {
			return 0, ErrDivisionByZero
		}
		return float64(a) / float64(b), nil
	case "%":
		if b == 0 {
			return 0, ErrDivisionByZero
		}
		return float64(a % b), nil // Go's % also takes the dividend's sign
	case "^", "**":
		if a == 0 && b < 0 {
			return 0, ErrDivisionByZero
		}
		// "-2 ^ 2" is -(2^2): the power binds tighter than the sign.
		v := math.Pow(math.Abs(float64(a)), float64(b))
		if a < 0 {
			v = -v
		}
		if math.IsInf(v, 0) {
			return 0, ErrOverflow
		}
		return v, nil
	default:
		panic("binary: unknown operator " + sym)
	}
}

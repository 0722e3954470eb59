package tools

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits on what Eval accepts. The input comes from a model, so it is bounded
// before any work is done, and the parser never recurses deeper than MaxDepth.
const (
	// MaxExprLen is the longest expression Eval accepts, in bytes.
	MaxExprLen = 1024
	// MaxDepth is the deepest nesting Eval accepts. Each enclosing pair of
	// parentheses and each enclosing exponent (the right side of ^) is a level.
	MaxDepth = 64
)

// Errors returned by Eval, wrapped with the byte offset where that helps.
// Syntax errors are reported as a *SyntaxError instead.
var (
	// ErrDivisionByZero is returned for x/0, x%0 and 0^y with y < 0.
	ErrDivisionByZero = errors.New("calc: division by zero")
	// ErrOverflow is returned when a number or an intermediate result is
	// too large for a float64 (±Inf), as in 10^400.
	ErrOverflow = errors.New("calc: result out of range")
	// ErrUndefined is returned when a result is not a real number (NaN),
	// as in (-8)^(1/3).
	ErrUndefined = errors.New("calc: result is not a real number")
	// ErrTooLong is returned for an expression longer than MaxExprLen.
	ErrTooLong = errors.New("calc: expression too long")
	// ErrTooDeep is returned for an expression nested deeper than MaxDepth.
	ErrTooDeep = errors.New("calc: expression nested too deeply")
)

// SyntaxError reports an expression that is not well formed.
type SyntaxError struct {
	Offset int    // byte offset in the expression
	Msg    string // what is wrong, such as `unexpected ")"`
}

// Error returns the message and the offset, for example
// `calc: unexpected ")" at offset 4`.
func (e *SyntaxError) Error() string {
	return fmt.Sprintf("calc: %s at offset %d", e.Msg, e.Offset)
}

// Eval evaluates an arithmetic expression such as "25 * (3 + 1.5e2) ^ 2" and
// returns its value, which is always finite. It is safe for concurrent use.
//
// The grammar, from loosest to tightest binding:
//
//	expr    = term { ("+" | "-") term }
//	term    = unary { ("*" | "/" | "%") unary }
//	unary   = { "+" | "-" } power
//	power   = primary [ "^" unary ]
//	primary = number | "(" expr ")"
//	number  = digits [ "." [ digits ] ] [ exponent ] | "." digits [ exponent ]
//	exponent = ("e" | "E") [ "+" | "-" ] digits
//
// So ^ is right-associative and binds tighter than a unary minus on its left,
// as in mathematics: -2^2 = -4, 2^-1 = 0.5 and 2^3^2 = 512. "**" is another
// spelling of "^", and "×", "÷" and "−" (U+2212) of "*", "/" and "-".
// % is the remainder with the sign of the dividend, like math.Mod.
// Whitespace may appear between tokens.
//
// Errors are a *SyntaxError, or wrap one of ErrDivisionByZero, ErrOverflow,
// ErrUndefined, ErrTooLong or ErrTooDeep. A syntax error anywhere is reported
// in preference to an arithmetic one, so the caller fixes the form first.
func Eval(expr string) (float64, error) {
	if len(expr) > MaxExprLen {
		return 0, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLong, len(expr), MaxExprLen)
	}
	toks, err := lex(expr)
	if err != nil {
		return 0, err
	}
	if toks[0].kind == tokEOF {
		return 0, &SyntaxError{Offset: 0, Msg: "empty expression"}
	}
	p := &parser{toks: toks}
	v, err := p.expr()
	if err != nil {
		return 0, err
	}
	if t := p.peek(); t.kind != tokEOF {
		return 0, unexpected(t)
	}
	if p.mathErr != nil {
		return 0, p.mathErr
	}
	if v == 0 {
		return 0, nil // not -0, which would print as "-0"
	}
	return v, nil
}

// Token kinds. Operators use their ASCII byte, after the Unicode and "**"
// spellings are mapped to it.
const (
	tokEOF    = 0
	tokNumber = 'n'
)

// operators maps each single-rune operator to its token kind.
var operators = map[rune]byte{
	'+': '+', '-': '-', '−': '-',
	'*': '*', '×': '*', '/': '/', '÷': '/',
	'%': '%', '^': '^', '(': '(', ')': ')',
}

type token struct {
	kind byte
	pos  int     // byte offset in the expression
	text string  // as written, for error messages
	val  float64 // for tokNumber
}

// lex splits src into tokens, ending with a tokEOF token.
func lex(src string) ([]token, error) {
	var toks []token
	for i := 0; i < len(src); {
		r, size := utf8.DecodeRuneInString(src[i:])
		if unicode.IsSpace(r) {
			i += size
			continue
		}
		t := token{pos: i}
		switch {
		case r >= '0' && r <= '9' || r == '.':
			size = numberLen(src[i:])
			v, err := strconv.ParseFloat(src[i:i+size], 64)
			if err != nil && !errors.Is(err, strconv.ErrRange) {
				return nil, &SyntaxError{Offset: i, Msg: fmt.Sprintf("malformed number %q", src[i:i+size])}
			}
			t.kind, t.val = tokNumber, v // ±Inf when out of range; the parser reports it
		case strings.HasPrefix(src[i:], "**"):
			t.kind, size = '^', 2
		case operators[r] != 0:
			t.kind = operators[r]
		default:
			// Quote the bytes, not r, so invalid UTF-8 shows as "\xff".
			return nil, &SyntaxError{Offset: i, Msg: fmt.Sprintf("unknown character %q", src[i:i+size])}
		}
		t.text = src[i : i+size]
		toks = append(toks, t)
		i += size
	}
	return append(toks, token{kind: tokEOF, pos: len(src)}), nil
}

// numberLen returns the length of the number at the start of s: digits and
// at most one ".", then an exponent only if it has digits, so "2e" is the
// number "2" followed by an unknown "e".
func numberLen(s string) int {
	n := digits(s, 0)
	if n < len(s) && s[n] == '.' {
		n = digits(s, n+1)
	}
	if n < len(s) && (s[n] == 'e' || s[n] == 'E') {
		e := n + 1
		if e < len(s) && (s[e] == '+' || s[e] == '-') {
			e++
		}
		if end := digits(s, e); end > e {
			n = end
		}
	}
	return n
}

// digits returns the index of the first non-digit in s at or after i.
func digits(s string, i int) int {
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

// parser evaluates while it parses. Syntax errors end parsing at once;
// the first arithmetic error is kept in mathErr and returned only if the
// whole expression parses.
type parser struct {
	toks    []token
	next    int // index of the next token in toks
	depth   int
	mathErr error
}

func (p *parser) peek() token { return p.toks[p.next] }

// take returns the next token and moves past it, but never past tokEOF.
func (p *parser) take() token {
	t := p.toks[p.next]
	if t.kind != tokEOF {
		p.next++
	}
	return t
}

func (p *parser) expr() (float64, error) {
	x, err := p.term()
	if err != nil {
		return 0, err
	}
	for k := p.peek().kind; k == '+' || k == '-'; k = p.peek().kind {
		op := p.take()
		y, err := p.term()
		if err != nil {
			return 0, err
		}
		x = p.apply(op, x, y)
	}
	return x, nil
}

func (p *parser) term() (float64, error) {
	x, err := p.unary()
	if err != nil {
		return 0, err
	}
	for k := p.peek().kind; k == '*' || k == '/' || k == '%'; k = p.peek().kind {
		op := p.take()
		y, err := p.unary()
		if err != nil {
			return 0, err
		}
		x = p.apply(op, x, y)
	}
	return x, nil
}

// unary reads signs in a loop rather than by recursion, so "------1" costs
// no stack.
func (p *parser) unary() (float64, error) {
	neg := false
	for p.peek().kind == '+' || p.peek().kind == '-' {
		if p.take().kind == '-' {
			neg = !neg
		}
	}
	x, err := p.power()
	if err != nil {
		return 0, err
	}
	if neg {
		x = -x
	}
	return x, nil
}

func (p *parser) power() (float64, error) {
	x, err := p.primary()
	if err != nil || p.peek().kind != '^' {
		return x, err
	}
	op := p.take()
	y, err := p.nested(op, p.unary) // unary, so that 2^-1 and 2^3^2 work
	if err != nil {
		return 0, err
	}
	return p.apply(op, x, y), nil
}

func (p *parser) primary() (float64, error) {
	t := p.take()
	switch t.kind {
	case tokNumber:
		return p.check(t, t.val), nil
	case '(':
		x, err := p.nested(t, p.expr)
		if err != nil {
			return 0, err
		}
		if c := p.take(); c.kind != ')' {
			return 0, unexpected(c)
		}
		return x, nil
	default:
		return 0, unexpected(t)
	}
}

// nested calls parse one level deeper, failing beyond MaxDepth.
func (p *parser) nested(at token, parse func() (float64, error)) (float64, error) {
	if p.depth >= MaxDepth {
		return 0, fmt.Errorf("%w: limit %d, at offset %d", ErrTooDeep, MaxDepth, at.pos)
	}
	p.depth++
	defer func() { p.depth-- }()
	return parse()
}

// apply computes x op y, recording an arithmetic error if there is one.
func (p *parser) apply(op token, x, y float64) float64 {
	switch op.kind {
	case '+':
		return p.check(op, x+y)
	case '-':
		return p.check(op, x-y)
	case '*':
		return p.check(op, x*y)
	case '/', '%':
		if y == 0 {
			p.fail(op, ErrDivisionByZero)
			return 0
		}
		if op.kind == '/' {
			return p.check(op, x/y)
		}
		return p.check(op, math.Mod(x, y))
	case '^':
		if x == 0 && y < 0 {
			p.fail(op, ErrDivisionByZero) // math.Pow would say +Inf
			return 0
		}
		return p.check(op, math.Pow(x, y))
	default:
		panic("calc: unknown operator " + op.text) // unreachable: the parser only passes operators
	}
}

// check records an error if v is not finite, so that an overflow in the
// middle of an expression (1/10^400) is not hidden by a finite result.
func (p *parser) check(at token, v float64) float64 {
	switch {
	case math.IsNaN(v):
		p.fail(at, ErrUndefined)
	case math.IsInf(v, 0):
		p.fail(at, ErrOverflow)
	}
	return v
}

func (p *parser) fail(at token, err error) {
	if p.mathErr == nil {
		p.mathErr = fmt.Errorf("%w at offset %d", err, at.pos)
	}
}

func unexpected(t token) *SyntaxError {
	switch t.kind {
	case tokEOF:
		return &SyntaxError{Offset: t.pos, Msg: "unexpected end of expression"}
	case tokNumber:
		return &SyntaxError{Offset: t.pos, Msg: fmt.Sprintf("unexpected number %q", t.text)}
	default:
		return &SyntaxError{Offset: t.pos, Msg: fmt.Sprintf("unexpected %q", t.text)}
	}
}

package offline

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// expression returns the first arithmetic expression in text, as the
// calculator reads it (internal/tools, Eval): numbers with decimals and
// exponents (2.5, .5, 1e308, 1.5E-3), the operators + - * / % ^ ** × ÷ −,
// unary signs and parentheses, with spaces between them. Thousands
// separators are dropped (1,000 is 1000). An expression has at least one
// binary operator, so "7" and "-7" are not one; ok is false when text holds
// none.
//
// The expression is cut from the sentence around it: a number that is part
// of a word (mp3, 2nd, 1.2.3) ends it, and so do a hyphen after a letter
// (COVID-19) and any other character. An operator or parenthesis at its
// edges that cannot belong to it is left out ("(see 2+3)" gives "2+3"). A
// parenthesis left open inside is kept, so that the calculator says what is
// wrong rather than the model guessing.
func expression(text string) (expr string, ok bool) {
	for _, run := range runs(text) {
		for _, seg := range split(run) {
			seg = trim(seg)
			if hasBinary(seg) {
				return join(text, seg), true
			}
		}
	}
	return "", false
}

// pieceKind is the grammatical role of a piece of an expression.
type pieceKind uint8

const (
	operand pieceKind = iota // a number
	binary                   // * / % ^ ** × ÷
	sign                     // + - −, binary or unary
	open                     // (
	closing                  // )
)

// piece is one token of an expression: its place in the text and the text
// the calculator gets, which differs from the source only for a number with
// thousands separators.
type piece struct {
	kind       pieceKind
	start, end int
	text       string
}

// runs splits text into runs of pieces separated by anything that cannot be
// part of an expression.
func runs(text string) [][]piece {
	var out [][]piece
	var cur []piece
	flush := func() {
		if len(cur) > 0 {
			out = append(out, cur)
			cur = nil
		}
	}
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		p := piece{start: i, end: i + size, text: text[i : i+size]}
		switch {
		case unicode.IsSpace(r):
			i += size
			continue
		case isDigit(r) || r == '.' && i+1 < len(text) && isDigit(rune(text[i+1])):
			n, num := number(text[i:])
			if inWord(text, i, i+n) {
				flush()
				i += n
				continue
			}
			p = piece{kind: operand, start: i, end: i + n, text: num}
		case strings.HasPrefix(text[i:], "**"):
			p = piece{kind: binary, start: i, end: i + 2, text: "**"}
		case strings.ContainsRune("*/%^×÷", r):
			p.kind = binary
		case strings.ContainsRune("+-−", r):
			if before, _ := utf8.DecodeLastRuneInString(text[:i]); unicode.IsLetter(before) {
				flush() // a hyphen, as in COVID-19
				i += size
				continue
			}
			p.kind = sign
		case r == '(':
			p.kind = open
		case r == ')':
			p.kind = closing
		default:
			flush()
			i += size
			continue
		}
		cur = append(cur, p)
		i = p.end
	}
	flush()
	return out
}

// number returns the length of the number at the start of s and its text
// for the calculator: digits, with thousands separators if every group has
// three digits, then a fraction only if a digit follows the point (so that
// the period ending "2+2." is not taken), then an exponent only if it has
// digits.
func number(s string) (int, string) {
	var b strings.Builder
	n := digits(s, 0)
	b.WriteString(s[:n])
	if n >= 1 && n <= 3 {
		for n+4 <= len(s) && s[n] == ',' && digits(s, n+1) == n+4 {
			b.WriteString(s[n+1 : n+4])
			n += 4
		}
	}
	if n+1 < len(s) && s[n] == '.' && isDigit(rune(s[n+1])) {
		end := digits(s, n+1)
		b.WriteString(s[n:end])
		n = end
	}
	if n < len(s) && (s[n] == 'e' || s[n] == 'E') {
		e := n + 1
		if e < len(s) && (s[e] == '+' || s[e] == '-') {
			e++
		}
		if end := digits(s, e); end > e {
			b.WriteString(s[n:end])
			n = end
		}
	}
	return n, b.String()
}

// digits returns the index of the first non-digit in s at or after i.
func digits(s string, i int) int {
	for i < len(s) && isDigit(rune(s[i])) {
		i++
	}
	return i
}

func isDigit(r rune) bool { return r >= '0' && r <= '9' }

// inWord reports whether the number text[start:end] is part of a word or of
// a longer token such as a version, as in mp3, 2nd, 3x4 or 1.2.3.
func inWord(text string, start, end int) bool {
	wordy := func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' }
	if before, _ := utf8.DecodeLastRuneInString(text[:start]); wordy(before) || before == '.' {
		return true
	}
	after, _ := utf8.DecodeRuneInString(text[end:])
	return wordy(after) || after == '.' && end+1 < len(text) && isDigit(rune(text[end+1]))
}

// split cuts a run where one piece cannot follow another, as in "2 3" or
// "2 * * 3".
func split(run []piece) [][]piece {
	var out [][]piece
	from := 0
	for i := 1; i < len(run); i++ {
		if !canFollow(run[i-1].kind, run[i].kind) {
			out = append(out, run[from:i])
			from = i
		}
	}
	return append(out, run[from:])
}

// canFollow reports whether b can come right after a in the calculator's
// grammar: after an operand, an operator or a closing parenthesis; after an
// operator or an opening parenthesis, an operand, a parenthesis or a sign.
func canFollow(a, b pieceKind) bool {
	if a == operand || a == closing {
		return b == binary || b == sign || b == closing
	}
	return b == operand || b == open || b == sign
}

// trim drops the pieces at the edges of seg that cannot belong to an
// expression there: a leading binary operator or ")", a trailing operator or
// "(", and an unmatched parenthesis at either end. Dropping them does not
// change which of the other parentheses match, so that is found once.
func trim(seg []piece) []piece {
	matched := make([]bool, len(seg))
	var opens []int // indexes of the "(" not closed yet
	for i, p := range seg {
		switch {
		case p.kind == open:
			opens = append(opens, i)
		case p.kind == closing && len(opens) > 0:
			matched[opens[len(opens)-1]], matched[i] = true, true
			opens = opens[:len(opens)-1]
		}
	}
	lo, hi := 0, len(seg)
	for lo < hi {
		if k := seg[lo].kind; k != binary && k != closing && (k != open || matched[lo]) {
			break
		}
		lo++
	}
	for hi > lo {
		if k := seg[hi-1].kind; k != binary && k != sign && k != open && (k != closing || matched[hi-1]) {
			break
		}
		hi--
	}
	return seg[lo:hi]
}

// hasBinary reports whether seg has an operator between two operands.
func hasBinary(seg []piece) bool {
	for i := 1; i < len(seg); i++ {
		if k := seg[i].kind; (k == binary || k == sign) && (seg[i-1].kind == operand || seg[i-1].kind == closing) {
			return true
		}
	}
	return false
}

// join writes seg as the calculator gets it, with the spacing of text.
func join(text string, seg []piece) string {
	var b strings.Builder
	for i, p := range seg {
		if i > 0 {
			b.WriteString(text[seg[i-1].end:p.start])
		}
		b.WriteString(p.text)
	}
	return b.String()
}

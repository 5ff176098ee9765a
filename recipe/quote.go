package recipe

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxQuoted is the number of bytes of a value [Quote] keeps; the rest is
// cut and its full length named.
const MaxQuoted = 256

// Quote returns s, a value another client may have written (node data, a
// node name, a participant's id, an ACL's id), in a form that is safe to
// print on a terminal or in a log line, and that tells the reader what the
// bytes were:
//
//   - s as it is, when it is valid UTF-8 of at most [MaxQuoted] bytes,
//     every character printable (strconv.IsPrint: letters, marks, numbers,
//     punctuation, symbols and the ASCII space) and it does not begin with
//     a double quote;
//   - otherwise s in double quotes with Go's escapes (strconv.Quote): C0
//     and C1 controls, DEL, bidirectional and other format characters
//     (U+202E, U+2066), line and paragraph separators and bytes that are
//     not UTF-8 are written as \x.., \u.... or \a-style escapes, so none of
//     them reaches the terminal;
//   - a value longer than MaxQuoted bytes is cut at a character boundary
//     and quoted, followed by "…(cut, N bytes)", N being its full length.
//
// The library's own error and log texts quote what others wrote with it,
// and the zklock command prints with it; programs that print node data or
// ids they did not write themselves can do the same.
//
// It takes node data as it comes ([]byte) as well as strings, and copies
// no more of a long value than it keeps.
func Quote[T ~string | ~[]byte](s T) string {
	if len(s) <= MaxQuoted {
		t := string(s)
		if !plain(t) {
			return strconv.Quote(t)
		}
		return t
	}
	cut := MaxQuoted
	for cut > MaxQuoted-utf8.UTFMax && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(string(s[:cut])) + "…(cut, " + strconv.Itoa(len(s)) + " bytes)"
}

// plain reports whether s can be printed as it is: valid UTF-8, every
// character printable, no leading double quote (which would make it look
// like a quoted value).
func plain(s string) bool {
	if strings.HasPrefix(s, `"`) {
		return false
	}
	for _, r := range s {
		if r == utf8.RuneError || !strconv.IsPrint(r) {
			return false // RuneError: a byte that is not UTF-8, or U+FFFD itself
		}
	}
	return true
}

package recipe_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// Quote leaves plain text alone and quotes every control a terminal acts
// on, whatever its encoding, and cuts long values naming their length.
func TestQuote(t *testing.T) {
	long := strings.Repeat("a", 1_000_001)
	for _, c := range []struct {
		name, in, want string
	}{
		{"plain", "host-1:4242", "host-1:4242"},
		{"spaces and accents", "café du nord", "café du nord"},
		{"empty", "", ""},
		{"C0 escape", "\x1b]0;PWNED\a\x1b[2J", `"\x1b]0;PWNED\a\x1b[2J"`},
		{"newline", "a\r\nfake line", `"a\r\nfake line"`},
		{"DEL", "a\x7fb", `"a\x7fb"`},
		{"C1 CSI", "a\u009b31mb", `"a\u009b31mb"`},
		{"C1 NEL", "a\u0085b", `"a\u0085b"`},
		{"bidi override", "abc\u202etxt.exe", `"abc\u202etxt.exe"`},
		{"bidi isolate", "a\u2066b", `"a\u2066b"`},
		{"line separator", "a\u2028b", `"a\u2028b"`},
		{"not UTF-8", "a\xffb", `"a\xffb"`},
		{"leading quote", `"x"`, `"\"x\""`},
		{"at the limit", strings.Repeat("b", recipe.MaxQuoted), strings.Repeat("b", recipe.MaxQuoted)},
		{"one past the limit", strings.Repeat("b", recipe.MaxQuoted+1), `"` + strings.Repeat("b", recipe.MaxQuoted) + `"…(cut, 257 bytes)`},
		{"megabyte", long, `"` + strings.Repeat("a", recipe.MaxQuoted) + `"…(cut, 1000001 bytes)`},
		{"cut inside a character", strings.Repeat("b", recipe.MaxQuoted-1) + "é" + "z", `"` + strings.Repeat("b", recipe.MaxQuoted-1) + `"…(cut, 258 bytes)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := recipe.Quote(c.in)
			if got != c.want {
				t.Fatalf("Quote(%.40q) = %.80q, want %.80q", c.in, got, c.want)
			}
			if !utf8.ValidString(got) {
				t.Errorf("Quote(%.40q) is not UTF-8", c.in)
			}
			for _, r := range got {
				if r < 0x20 || (r >= 0x7f && r <= 0x9f) || (r >= 0x2028 && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) {
					t.Errorf("Quote(%.40q) = %.80q carries control U+%04X", c.in, got, r)
				}
			}
		})
	}
}

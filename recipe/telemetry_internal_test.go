package recipe

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestDataAttr(t *testing.T) {
	const mark = "…(cut, "
	for _, c := range []struct {
		name string
		data string
		want string // the value before the mark
		cut  bool
	}{
		{"empty", "", "", false},
		{"host:pid", "web-3:4121", "web-3:4121", false},
		{"exactly the limit", strings.Repeat("a", maxAttrData), strings.Repeat("a", maxAttrData), false},
		{"one byte over", strings.Repeat("a", maxAttrData+1), strings.Repeat("a", maxAttrData), true},
		// 2 + 3*84 = 254 bytes fit; the next euro sign would end at 257.
		{"multi-byte characters", "xy" + strings.Repeat("€", 200), "xy" + strings.Repeat("€", 84), true},
		{"not UTF-8, short", "a\xffb\xc3", "a\uFFFDb\uFFFD", false},
		// Each bad byte takes 3 bytes as U+FFFD: 85 of them fit in 256.
		{"not UTF-8, long", strings.Repeat("\xff", 100), strings.Repeat("\uFFFD", 85), true},
		{"huge", strings.Repeat("h", 512000), strings.Repeat("h", maxAttrData), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := dataAttr([]byte(c.data))
			if !utf8.ValidString(got) {
				t.Fatalf("dataAttr = %q: not UTF-8", got)
			}
			value, rest, cut := strings.Cut(got, mark)
			if value != c.want || cut != c.cut {
				t.Fatalf("dataAttr = %q, want %q (cut: %v)", got, c.want, c.cut)
			}
			if cut && rest != strconv.Itoa(len(c.data))+" bytes)" {
				t.Errorf("mark %q, want the data's length %d", mark+rest, len(c.data))
			}
			if len(value) > maxAttrData {
				t.Errorf("value of %d bytes, more than %d", len(value), maxAttrData)
			}
		})
	}
}

func TestErrorType(t *testing.T) {
	if got := errorType(errors.New("x")); got != "*errors.errorString" {
		t.Errorf("errorType(errors.New) = %q", got)
	}
}

package demo

import (
	"fmt"
	"time"
)

// Term is a leader's term as an observer saw it begin.
type Term struct {
	ID    string    // the leader's id
	Token int64     // its fencing token
	At    time.Time // when the observer saw it
}

// SummarizeTerms prints the terms an observer saw, with when each began
// and ended on the demo's clock (see [Elapsed]). It returns 0 if ok and
// the tokens increased from term to term.
func SummarizeTerms(terms []Term, ok bool) int {
	fmt.Printf("\nterms seen by the observer\n")
	for i, t := range terms {
		until := "end of the demo"
		if i+1 < len(terms) {
			until = fmt.Sprintf("%6.2fs", terms[i+1].At.Sub(start).Seconds())
		}
		fmt.Printf("  %-9s token=%#x  from %6.2fs  until %s\n", t.ID, t.Token, t.At.Sub(start).Seconds(), until)
	}
	for i := 1; i < len(terms); i++ {
		if terms[i].Token <= terms[i-1].Token {
			fmt.Println("FAIL: tokens did not increase from term to term")
			ok = false
		}
	}
	if !ok {
		return 1
	}
	fmt.Println("ok: one leader at a time, tokens increasing from term to term")
	return 0
}

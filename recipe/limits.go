package recipe

import (
	"math"
	"time"
)

// The session timeouts a [Client] may ask for. The protocol carries the
// timeout as a 32-bit number of milliseconds; go-zookeeper derives its
// read and connect deadlines from it, so that a few milliseconds fail
// every connect. The server grants something in its own range anyway.
const (
	minSessionTimeout = 100 * time.Millisecond
	maxSessionTimeout = math.MaxInt32 * time.Millisecond
)

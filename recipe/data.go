package recipe

import (
	"fmt"
	"os"
)

// DefaultNodeData is the data stored in lock nodes unless a recipe is given
// some: "<host name>:<pid>", so an operator listing a lock's queue can see
// which process holds or waits.
func DefaultNodeData() []byte {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	return []byte(fmt.Sprintf("%s:%d", host, os.Getpid()))
}

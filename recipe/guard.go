package recipe

import (
	"runtime/debug"
	"slices"
)

// Direct requests (direct.go) rest on how go-zookeeper uses the connection,
// which is not its API: contract_test.go pins each assumption against the
// version in go.mod, and the wire tap (wireTap) checks them on every
// connection. This file decides, at Connect and afterwards, whether a
// client makes direct requests.

// zkModule is go-zookeeper's module path.
const zkModule = "github.com/go-zookeeper/zk"

// testedZK lists the go-zookeeper versions the contract tests passed with.
// A build that names another one starts with direct requests off.
var testedZK = []string{"v1.0.4"}

// zkVersion returns the go-zookeeper version the running program was
// built with, as its build information names it, and whether the contract
// tests passed with it. A program without build information (a test
// binary) or built against a directory (a replace by a local copy, such as
// a patched one) names no version: known is false, and the live checks
// alone decide.
func zkVersion(info *debug.BuildInfo, ok bool) (version string, known, tested bool) {
	if !ok || info == nil {
		return "", false, false
	}
	for _, d := range info.Deps {
		if d.Path != zkModule {
			continue
		}
		m := d
		if d.Replace != nil {
			m = d.Replace
		}
		if m.Version == "" || m.Version == "(devel)" {
			return "", false, false
		}
		return m.Version, true, slices.Contains(testedZK, m.Version)
	}
	return "", false, false
}

// readBuildInfo is debug.ReadBuildInfo; tests replace it.
var readBuildInfo = debug.ReadBuildInfo

// startDirect decides, at Connect, whether the client starts with direct
// requests: the option or the environment (WithDirectRequests), then the
// build's go-zookeeper version.
func (c *Client) startDirect() {
	if c.cfg.direct < 0 {
		c.directOff.Store(true)
		return
	}
	if v, known, tested := zkVersion(readBuildInfo()); known && !tested {
		c.directOff.Store(true)
		c.stats.directDisabled.Store(1)
		c.log.Info("direct requests off: this build's go-zookeeper was never tested with them",
			"version", v, "tested", testedZK)
	}
}

// wireBroke turns direct requests off for good, when a connection's wire
// broke one of the assumptions they rest on (see wireTap). Requests in
// flight finish as they would have; the next go through go-zookeeper.
func (c *Client) wireBroke(reason string) {
	if c.directOff.Swap(true) {
		return
	}
	c.stats.directDisabled.Store(1)
	c.log.Warn("direct requests off for good: the connection broke an assumption they rest on", "reason", reason)
}

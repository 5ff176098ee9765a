package recipe

import (
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"
)

// A Client prints as a summary, never as its fields: its configuration
// holds the digest password ([WithDigestAuth]), and go-zookeeper's
// connection inside it the credentials it sends again on each reconnect.
// Format, GoString and LogValue all print the same few facts: the session
// id, the session timeout, the digest user (never the password) and
// whether the client is closed.

// Format prints the client's summary under every verb (%v, %+v, %s, %#v
// alike), so that fmt never walks its fields.
func (c *Client) Format(f fmt.State, _ rune) {
	_, _ = io.WriteString(f, c.summary())
}

// GoString returns the client's summary, for %#v.
func (c *Client) GoString() string { return c.summary() }

// String returns the client's summary.
func (c *Client) String() string { return c.summary() }

// LogValue returns the client's summary as a group of attributes (session,
// session_timeout, user, closed), for log/slog.
func (c *Client) LogValue() slog.Value {
	if c == nil {
		return slog.StringValue("<nil>")
	}
	attrs := []slog.Attr{
		slog.String("session", "0x"+strconv.FormatInt(c.SessionID(), 16)),
		slog.Duration("session_timeout", c.SessionTimeout()),
	}
	if c.cfg.auth {
		attrs = append(attrs, slog.String("user", Quote(c.cfg.authUser)))
	}
	attrs = append(attrs, slog.Bool("closed", c.isClosed()))
	return slog.GroupValue(attrs...)
}

func (c *Client) summary() string {
	if c == nil {
		return "recipe.Client(nil)"
	}
	s := "recipe.Client{session: 0x" + strconv.FormatInt(c.SessionID(), 16) +
		", session timeout: " + c.SessionTimeout().Round(time.Millisecond).String()
	if c.cfg.auth {
		s += ", user: " + Quote(c.cfg.authUser)
	}
	if c.isClosed() {
		s += ", closed"
	}
	return s + "}"
}

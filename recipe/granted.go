package recipe

// grantedOther is the message of the warning logged when the server grants
// another session timeout than the one asked for.
const grantedOther = "zookeeper granted another session timeout than asked"

// warnGranted logs, at warn level, a session timeout the server granted
// other than the one asked for ([WithSessionTimeout]). Servers clamp the
// timeout to their minSessionTimeout..maxSessionTimeout (by default 2 to
// 20 times their tickTime), so a 2s session on a server ticking every 3s
// lasts 6s: every bound that follows from it (the loss timeout, how long
// a dead holder keeps its lock) moves with it. [Client.SessionTimeout]
// gives the granted value.
func (c *Client) warnGranted() {
	asked, granted := c.cfg.sessionTimeout, c.SessionTimeout()
	if granted > 0 && granted != asked {
		c.log.Warn(grantedOther, "asked", asked, "granted", granted, "loss_timeout", c.lossTimeout())
	}
}

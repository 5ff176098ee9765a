package recipe

import (
	"testing"

	"go.opentelemetry.io/otel/metric/noop"
)

// Clients made with the same meter provider share its instruments: the
// global provider keeps every instrument made on it until a program
// installs its own, so instruments per client would grow with every
// client ever made.
func TestClientsShareInstruments(t *testing.T) {
	a := fakeClient(t, newFakeZK())
	b := fakeClient(t, newFakeZK())
	if a.ins.acquisitions != b.ins.acquisitions || a.ins.holdDuration != b.ins.holdDuration {
		t.Error("two clients on the global meter provider made instruments of their own")
	}
	// Another provider gets instruments of its own.
	c := fakeClient(t, newFakeZK(), func(c *config) { c.meterProvider, c.meterSet = noop.NewMeterProvider(), true })
	if c.ins.acquisitions == a.ins.acquisitions {
		t.Error("a client on another provider got the global provider's instruments")
	}
}

// Package telemetry names what the zkrecipes recipes report to
// OpenTelemetry: the attribute keys on their spans and metrics, and the
// metric names, for dashboards, alerts and tests. The recipes use the
// client's tracer and meter providers (see recipe.WithTracerProvider and
// recipe.WithMeterProvider; the otel globals by default). See
// docs/observability.md for the spans and their events.
package telemetry

import "go.opentelemetry.io/otel/attribute"

// Attribute keys on spans and metrics.
const (
	AttrRecipe     = attribute.Key("zkrecipes.recipe")           // "mutex", "rwlock.read", "semaphore", ...
	AttrPath       = attribute.Key("zkrecipes.lock.path")        // the lock directory (spans only)
	AttrNode       = attribute.Key("zkrecipes.lock.node")        // our node's name (spans only)
	AttrToken      = attribute.Key("zkrecipes.lock.token")       // fencing token of the hold (spans only)
	AttrPosition   = attribute.Key("zkrecipes.lock.position")    // queue position when enqueued (spans only)
	AttrWaitMs     = attribute.Key("zkrecipes.lock.wait_ms")     // time spent acquiring (spans only)
	AttrCount      = attribute.Key("zkrecipes.lock.count")       // nodes acquired together (AcquireN)
	AttrOutcome    = attribute.Key("zkrecipes.lock.outcome")     // acquired, timeout, cancelled, held_elsewhere, error
	AttrLossReason = attribute.Key("zkrecipes.lock.loss_reason") // session_expired, node_deleted, connection_suspended, client_closed, max_hold, other
	AttrHoldEnd    = attribute.Key("zkrecipes.lock.hold.end")    // how a hold ended: released, lost, max_hold
	// The node a waiter waits on (the first the driver named) and that
	// node's data, by default its holder's "host:pid" (spans only).
	AttrWaitingOnNode = attribute.Key("zkrecipes.lock.waiting_on_node")
	AttrWaitingOn     = attribute.Key("zkrecipes.lock.waiting_on")
)

// AttrReason is the former name of [AttrLossReason].
//
// Deprecated: use AttrLossReason, whose name matches the key
// "zkrecipes.lock.loss_reason". AttrReason goes in the next minor release.
const AttrReason = AttrLossReason

// Metric names.
const (
	MetricAcquireDuration = "zkrecipes.lock.acquire.duration" // histogram, seconds, by recipe and outcome
	MetricAcquisitions    = "zkrecipes.lock.acquisitions"     // counter, by recipe
	MetricTimeouts        = "zkrecipes.lock.timeouts"         // counter, by recipe
	MetricLosses          = "zkrecipes.lock.losses"           // counter, by recipe and loss_reason
	MetricHolders         = "zkrecipes.lock.holders"          // up-down counter, by recipe
	MetricWaiters         = "zkrecipes.lock.waiters"          // up-down counter, by recipe
	MetricHoldDuration    = "zkrecipes.lock.hold.duration"    // histogram, seconds, by recipe and hold.end
)

module github.com/zkrecipes/zkrecipes

go 1.26.0

// Each requirement is the lowest version that provides what this module
// uses (see CHANGELOG.md), so that adopting it forces no upgrade.
// OpenTelemetry v1.22.0: the oldest whose SDK passes our telemetry tests
// (metric.WithExplicitBucketBoundaries needs v1.20.0). The SDK packages
// (otel/sdk, otel/sdk/metric) are imported only by tests, examples and
// internal tools, as is goleak.
require (
	github.com/cenkalti/backoff/v4 v4.3.0
	github.com/go-zookeeper/zk v1.0.4
	github.com/google/uuid v1.2.0
	go.opentelemetry.io/otel v1.22.0
	go.opentelemetry.io/otel/metric v1.22.0
	go.opentelemetry.io/otel/sdk v1.22.0 // tests, examples, internal tools
	go.opentelemetry.io/otel/sdk/metric v1.22.0 // tests, examples, internal tools
	go.opentelemetry.io/otel/trace v1.22.0
	go.uber.org/goleak v1.1.10 // tests
)

require (
	github.com/anishathalye/porcupine v1.3.1 // indirect
	github.com/go-logr/logr v1.4.1 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	golang.org/x/lint v0.0.0-20190930215403-16217165b5de // indirect
	golang.org/x/sys v0.16.0 // indirect
	golang.org/x/tools v0.0.0-20191108193012-7d206e10da11 // indirect
)

#!/usr/bin/env bash
# Copies each example out of the repository into a module of its own, as a
# user would copy it, and proves it builds, vets and runs there:
#
#   go mod init example.com/x
#   go mod edit -replace github.com/zkrecipes/zkrecipes=<this checkout> -require ...
#   GOWORK=off GOFLAGS=-mod=mod go mod tidy && go build ./... && go vet ./...
#
# then runs it for a few seconds against a ZooKeeper server: ZK_ADDR
# (host:port) if set, else one started here with scripts/zk.sh (port
# ZK_PORT, default 21812). Exits non-zero if any example fails.
#
#   scripts/examples-outside.sh [example ...]    (default: every example)
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
zkdir="$work/zk"
started=0 # a server of this script's own, stopped on the way out
cleanup() {
	if ((started)); then "$repo/scripts/zk.sh" stop --dir "$zkdir" >/dev/null 2>&1 || true; fi
	rm -rf "$work"
}
trap cleanup EXIT

if [[ -z ${ZK_ADDR:-} ]]; then
	port=${ZK_PORT:-21812}
	started=1
	"$repo/scripts/zk.sh" start --port "$port" --dir "$zkdir" >/dev/null
	ZK_ADDR=127.0.0.1:$port
fi

# Flags that make each run short; every run gets its own ZooKeeper path.
declare -A flags=(
	[custom-recipe]=""
	[guarded-counter]="-workers 3 -increments 4 -evict"
	[jobs]="-workers 3 -jobs 6 -slots 2"
	[leader]="-session-timeout 2s -tick 250ms -kill-after 1s -resign-after 3s -duration 4s"
	[mutex-counter]="-workers 3 -increments 5"
	[rwlock]="-readers 2 -writers 1 -reads 3 -writes 2"
	[semaphore]="-workers 4 -leases 2 -rounds 2"
	[tracing]=""
)

if (($#)); then names=("$@"); else names=(custom-recipe guarded-counter jobs leader mutex-counter rwlock semaphore tracing); fi
export GOWORK=off
failed=()
for name in "${names[@]}"; do
	dir="$work/$name"
	cp -r "$repo/examples/$name" "$dir"
	log="$work/$name.log"
	if (
		cd "$dir"
		# A package of the example itself is imported under the new module's path.
		grep -rl "github.com/zkrecipes/zkrecipes/examples/$name/" --include='*.go' . |
			xargs -r sed -i "s#github.com/zkrecipes/zkrecipes/examples/$name/#example.com/x/#"
		go mod init example.com/x
		go mod edit -replace "github.com/zkrecipes/zkrecipes=$repo" \
			-require github.com/zkrecipes/zkrecipes@v0.0.0-00010101000000-000000000000
		GOFLAGS="-mod=mod ${GOFLAGS:-}" go mod tidy
		go build ./...
		go vet ./...
		go build -o "$work/$name.bin" .
		# shellcheck disable=SC2086 # the flags are words
		timeout 120 "$work/$name.bin" -zk "$ZK_ADDR" -path "/examples-outside/$name-$$" ${flags[$name]}
	) >"$log" 2>&1; then
		echo "ok    $name  (built, vetted and ran outside the repository: $(grep -c . "$log") lines of output)"
	else
		echo "FAIL  $name"
		sed 's/^/      /' "$log"
		failed+=("$name")
	fi
done
if ((${#failed[@]})); then
	echo "examples that failed outside the repository: ${failed[*]}"
	exit 1
fi

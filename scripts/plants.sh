#!/usr/bin/env bash
# Plants each bug of recipe/testdata/plants, one at a time, in a scratch
# worktree of HEAD (the repository's own tree is not touched), and shows
# that the simulation finds it: the scripted case the patch names fails
# its replays (-sim.replays, 20), and TestSimulate, from each of SEEDS,
# fails within some schedules. Then the same case runs without the bug.
# Needs the workspace of make patched-zk.
set -euo pipefail
cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.."
root=$PWD
GO=${GO:-go}
SEEDS=${SEEDS:-1 10001 20001}
SCHEDULES=${SCHEDULES:-5000}
REPLAYS=${REPLAYS:-20}
PLANTS=${PLANTS:-recipe/testdata/plants/*.patch}

scratch=$(mktemp -d)
cleanup() {
	git worktree remove --force "$scratch/wt" >/dev/null 2>&1 || true
	rm -rf -- "$scratch"
}
trap cleanup EXIT
git worktree add -q --detach "$scratch/wt" HEAD
cat >"$scratch/go.work" <<WORK
go 1.26.0

use $scratch/wt

replace github.com/go-zookeeper/zk v1.0.4 => $root/.cache/go-zookeeper-zk
WORK
export GOWORK=$scratch/go.work

# replays NAME: the scripted case's line of TestSimulateCases.
replays() {
	local re
	re=$(printf '%s' "$1" | tr ' ' '_')
	(cd "$scratch/wt" && $GO test -count=1 -run "^TestSimulateCases\$/^${re}\$" ./recipe/ -args -sim.replays="$REPLAYS" 2>&1 |
		grep -a -o -E 'failed [0-9]+ of [0-9]+ replays|^ok ' | head -1 | sed 's/^ok $/passed every replay/')
}

# first SEED: the first schedule from SEED that fails.
first() {
	(cd "$scratch/wt" && $GO test -count=1 -v -run '^TestSimulate$' ./recipe/ -args -sim.seed="$1" -sim.schedules="$SCHEDULES" 2>&1 |
		grep -a -o -E 'sim\.seed=[0-9]+ -sim\.schedules=1|[0-9]+ schedules in [^:]*' |
		awk -v s="$1" '/schedules in/ { n = $1; next } { sub("sim.seed=", ""); print $1 - s + 1 | "sort -n > /dev/stderr" } END { close("sort -n > /dev/stderr"); print n }' 2>"$scratch/failed" |
		{
			read -r n
			f=$(tr '\n' ' ' <"$scratch/failed")
			if [[ -n $f ]]; then echo "schedules ${f}of ${n:-?} run"; else echo "none of ${n:-?} run"; fi
		})
}

for p in $PLANTS; do
	name=$(basename "$p" .patch)
	case_name=$(sed -n 's/^Case: //p' "$p")
	(cd "$scratch/wt" && git apply "$root/$p")
	echo "== $name (case: $case_name)"
	echo "   with the bug:    $(replays "$case_name")"
	for s in $SEEDS; do
		echo "   from seed $s: failed at $(first "$s")"
	done
	(cd "$scratch/wt" && git apply -R "$root/$p")
	echo "   without the bug: $(replays "$case_name")"
done

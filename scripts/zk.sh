#!/usr/bin/env bash
# zk.sh - install and run Apache ZooKeeper for zkrecipes development and tests.
#
# Usage:
#   scripts/zk.sh install [--curator] [--kazoo]
#       Install Debian's zookeeper package (and with it a JRE) if missing;
#       with --curator also libcurator-recipes-java and a JDK (javac) for
#       the Curator interoperability tests and benchmarks; with --kazoo
#       python3-kazoo for the kazoo interoperability tests (run with
#       /usr/bin/python3) and the benchmarks. Runs apt-get update once, and
#       only when something is missing.
#   scripts/zk.sh run CONFIG_FILE LOGDIR
#       Run a server for CONFIG_FILE in the foreground (exec: the process id
#       stays the JVM's). Output goes to LOGDIR/zookeeper.log, or to stdout
#       when ZK_LOG_STDOUT=1.
#   scripts/zk.sh start [--port P] [--dir D]
#       Start a standalone server in the background on 127.0.0.1:P
#       (default 21811) with its config, data, log and pid file under D
#       (default: the state directory below), and wait until it answers.
#   scripts/zk.sh stop [--dir D]
#       Stop the server started from D.
#   scripts/zk.sh status [--dir D]
#       Tell whether the server started from D is running and serving.
#
# Environment:
#   ZK_JAR                 ZooKeeper jar (default /usr/share/java/zookeeper.jar)
#   ZK_CONF_DIR            directory with log4j.properties (default /etc/zookeeper/conf)
#   CURATOR_JAR            Curator recipes jar (default /usr/share/java/curator-recipes.jar)
#   ZK_CONTAINER_CHECK_MS  container/TTL node check interval in ms (default 1000)
#                          (TTL nodes are enabled: zookeeper.extendedTypesEnabled)
#   ZK_HEAP_MAX            maximum JVM heap (default 256m)
#   ZK_LOG_STDOUT          1: "run" writes the server log to stdout instead of LOGDIR
#   ZK_START_TIMEOUT       seconds "start" waits for the server (default 30)
#   ZK_STATE_DIR           default D of start, stop and status (default
#                          $XDG_CACHE_HOME/zkrecipes/zk-<checkout> or
#                          ~/.cache/zkrecipes/zk-<checkout>, falling back to
#                          ${TMPDIR:-/tmp}/zkrecipes-<uid>/zk-<checkout> when
#                          that cannot be made): outside the checkout, so a
#                          read-only checkout works; one per checkout
set -euo pipefail

SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd -- "$SCRIPT_DIR/.." && pwd)
SELF="$SCRIPT_DIR/$(basename -- "${BASH_SOURCE[0]}")"

ZK_JAR=${ZK_JAR:-/usr/share/java/zookeeper.jar}
ZK_CONF_DIR=${ZK_CONF_DIR:-/etc/zookeeper/conf}
CURATOR_JAR=${CURATOR_JAR:-/usr/share/java/curator-recipes.jar}
DEFAULT_PORT=21811
# default_dir prints the state directory of this checkout's server: under
# the user's cache, or under $TMPDIR when the cache cannot be made. The
# name carries a checksum of the checkout's path, so two checkouts keep
# separate servers and start, stop and status always agree.
default_dir() {
	if [[ -n ${ZK_STATE_DIR:-} ]]; then
		printf '%s\n' "$ZK_STATE_DIR"
		return
	fi
	local tag base
	tag="$(basename -- "$REPO")-$(printf '%s' "$REPO" | cksum | cut -d' ' -f1)"
	base=${XDG_CACHE_HOME:-${HOME:-/nonexistent}/.cache}/zkrecipes
	if mkdir -p -- "$base" 2>/dev/null && [[ -w $base ]]; then
		printf '%s\n' "$base/zk-$tag"
		return
	fi
	printf '%s\n' "${TMPDIR:-/tmp}/zkrecipes-$(id -u)/zk-$tag"
}
DEFAULT_DIR=$(default_dir)

log() { printf 'zk.sh: %s\n' "$*" >&2; }
die() {
	log "$*"
	exit 1
}

usage() {
	sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$SELF" >&2
	exit 2
}

# as_root runs a command as root, through sudo when needed and available.
as_root() {
	if [[ $(id -u) -eq 0 ]]; then
		"$@"
	elif command -v sudo >/dev/null 2>&1; then
		sudo "$@"
	else
		die "need root (or sudo) to run: $*"
	fi
}

zk_installed() {
	[[ -f $ZK_JAR ]] && command -v java >/dev/null 2>&1
}

# missing_packages prints the Debian packages to install: zookeeper when its
# jar is missing, with --curator Curator's recipes and a JDK (javac), and
# with --kazoo python3-kazoo.
missing_packages() {
	local curator=$1 kazoo=$2
	if [[ ! -f $ZK_JAR ]] || ! dpkg-query -W -f='${Status}' zookeeper 2>/dev/null | grep -q 'install ok installed'; then
		echo zookeeper
	fi
	if [[ $curator == 1 ]]; then
		[[ -f $CURATOR_JAR ]] || echo libcurator-recipes-java
		command -v javac >/dev/null 2>&1 || echo default-jdk-headless
	fi
	if [[ $kazoo == 1 ]] && ! dpkg-query -W -f='${Status}' python3-kazoo 2>/dev/null | grep -q 'install ok installed'; then
		echo python3-kazoo
	fi
}

cmd_install() {
	local curator=0 kazoo=0
	while [[ $# -gt 0 ]]; do
		case $1 in
		--curator) curator=1; shift ;;
		--kazoo) kazoo=1; shift ;;
		*) usage ;;
		esac
	done
	local -a pkgs
	mapfile -t pkgs < <(missing_packages "$curator" "$kazoo")
	if [[ ${#pkgs[@]} -gt 0 ]]; then
		command -v apt-get >/dev/null 2>&1 || die "missing ${pkgs[*]} and apt-get is not available: install Apache ZooKeeper 3.8, a JRE (and for --curator Apache Curator 5 and a JDK) by hand"
		log "installing ${pkgs[*]}"
		# ZK_APT_UPDATED=1: the caller has just run apt-get update.
		if [[ ${ZK_APT_UPDATED:-} != 1 ]]; then
			as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
		fi
		as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${pkgs[@]}" >/dev/null
	fi
	[[ -f $ZK_JAR ]] || die "$ZK_JAR is still missing after installing the zookeeper package"
	command -v java >/dev/null 2>&1 || die "java is missing: install a JRE (e.g. apt-get install default-jre-headless)"
	if [[ $curator == 1 ]]; then
		[[ -f $CURATOR_JAR ]] || die "$CURATOR_JAR is still missing after installing libcurator-recipes-java"
		command -v javac >/dev/null 2>&1 || die "javac is missing: install a JDK (e.g. apt-get install default-jdk-headless)"
	fi
	if [[ $kazoo == 1 ]]; then
		# Debian's interpreter, not the first python3 on PATH (a pyenv one
		# does not see Debian's packages).
		/usr/bin/python3 -c 'import kazoo' 2>/dev/null || die "/usr/bin/python3 cannot import kazoo after installing python3-kazoo"
	fi
	if [[ ${#pkgs[@]} -gt 0 ]]; then
		log "installed ${pkgs[*]}"
	fi
}

cmd_run() {
	[[ $# -eq 2 ]] || usage
	local cfg=$1 logdir=$2
	[[ -f $cfg ]] || die "no such config file: $cfg"
	zk_installed || die "ZooKeeper is not installed: run scripts/zk.sh install"
	mkdir -p -- "$logdir"
	local check_ms=${ZK_CONTAINER_CHECK_MS:-1000}
	local heap=${ZK_HEAP_MAX:-256m}
	local -a jvm=(
		-Xms64m "-Xmx$heap"
		-XX:+UseSerialGC
		-XX:TieredStopAtLevel=1
		-XX:-UsePerfData
		-Xshare:auto
		-Djava.net.preferIPv4Stack=true
		-Dzookeeper.log.dir="$logdir"
		"-Dzookeeper.root.logger=INFO,CONSOLE"
		-Dzookeeper.admin.enableServer=false
		-Dzookeeper.jmx.log4j.disable=true
		-Dznode.container.checkIntervalMs="$check_ms"
		-Dzookeeper.extendedTypesEnabled=true
	)
	if [[ ${ZK_LOG_STDOUT:-0} != 1 ]]; then
		exec >>"$logdir/zookeeper.log" 2>&1
	fi
	# The zookeeper jar only pulls in slf4j-api: bind it to log4j 1.2 (both
	# are dependencies of Debian's libzookeeper-java) so the server logs.
	# Its manifest also leaves out two jars of Debian's libnetty-java that
	# the Netty connection factory (NettyServerCnxnFactory, needed for a
	# secureClientPort) loads: netty-codec (for TLS) and netty-resolver.
	local cp="$ZK_CONF_DIR:$ZK_JAR" jar
	for jar in /usr/share/java/slf4j-log4j12.jar /usr/share/java/log4j-1.2.jar \
		/usr/share/java/netty-codec.jar /usr/share/java/netty-resolver.jar; do
		if [[ -f $jar ]]; then
			cp+=":$jar"
		fi
	done
	exec java "${jvm[@]}" -cp "$cp" \
		org.apache.zookeeper.server.quorum.QuorumPeerMain "$cfg"
}

# four_letter PORT CMD prints the reply of a four-letter-word command.
four_letter() {
	# shellcheck disable=SC2016 # expanded by the inner bash
	timeout 5 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" && printf "%s" "$2" >&3 && cat <&3' \
		_ "$1" "$2" 2>/dev/null
}

# parse_opts sets PORT and DIR from --port/--dir options.
parse_opts() {
	PORT=$DEFAULT_PORT
	DIR=$DEFAULT_DIR
	while [[ $# -gt 0 ]]; do
		case $1 in
		--port) [[ $# -ge 2 ]] || usage; PORT=$2; shift 2 ;;
		--port=*) PORT=${1#*=}; shift ;;
		--dir) [[ $# -ge 2 ]] || usage; DIR=$2; shift 2 ;;
		--dir=*) DIR=${1#*=}; shift ;;
		*) usage ;;
		esac
	done
	[[ $PORT =~ ^[0-9]+$ ]] || die "bad port: $PORT"
	if [[ -d $DIR ]]; then
		DIR=$(cd -- "$DIR" && pwd)
	fi
	PIDFILE="$DIR/zookeeper.pid"
}

# alive PID: the process exists and is not a zombie waiting to be reaped.
alive() {
	local stat
	kill -0 "$1" 2>/dev/null || return 1
	stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
	stat=${stat##*) }
	[[ ${stat:0:1} != Z ]]
}

# running_pid prints the pid of the server started from DIR if it is alive.
running_pid() {
	local pid
	[[ -f $PIDFILE ]] || return 1
	pid=$(<"$PIDFILE")
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	alive "$pid" || return 1
	# Guard against a recycled pid: it must be a ZooKeeper JVM.
	grep -q QuorumPeerMain "/proc/$pid/cmdline" 2>/dev/null || return 1
	printf '%s\n' "$pid"
}

cmd_start() {
	parse_opts "$@"
	cmd_install
	local pid
	if pid=$(running_pid); then
		echo "ZooKeeper already running from $DIR (pid $pid) on 127.0.0.1:$(sed -n 's/^clientPort=//p' "$DIR/zoo.cfg")"
		return 0
	fi
	mkdir -p -- "$DIR/data"
	DIR=$(cd -- "$DIR" && pwd)
	PIDFILE="$DIR/zookeeper.pid"
	cat >"$DIR/zoo.cfg" <<EOF
tickTime=500
dataDir=$DIR/data
clientPort=$PORT
clientPortAddress=127.0.0.1
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=*
minSessionTimeout=1000
maxSessionTimeout=60000
forceSync=no
preAllocSize=4096
autopurge.snapRetainCount=3
autopurge.purgeInterval=1
EOF
	: >"$DIR/zookeeper.log"
	nohup bash "$SELF" run "$DIR/zoo.cfg" "$DIR" </dev/null >/dev/null 2>&1 &
	pid=$!
	echo "$pid" >"$PIDFILE"
	local deadline=$((SECONDS + ${ZK_START_TIMEOUT:-30}))
	# ruok answers as soon as the port is open; srvr reports a Mode only
	# once the server actually serves requests.
	while [[ $(four_letter "$PORT" ruok || true) != imok ]] ||
		[[ $(four_letter "$PORT" srvr || true) != *Mode:* ]]; do
		if ! alive "$pid"; then
			rm -f -- "$PIDFILE"
			tail -n 30 "$DIR/zookeeper.log" >&2 || true
			die "ZooKeeper exited during startup (log: $DIR/zookeeper.log)"
		fi
		if ((SECONDS >= deadline)); then
			kill -KILL "$pid" 2>/dev/null || true
			rm -f -- "$PIDFILE"
			tail -n 30 "$DIR/zookeeper.log" >&2 || true
			die "ZooKeeper did not answer on 127.0.0.1:$PORT within ${ZK_START_TIMEOUT:-30}s"
		fi
		sleep 0.1
	done
	echo "ZooKeeper up on 127.0.0.1:$PORT"
}

cmd_stop() {
	parse_opts "$@"
	local pid
	if ! pid=$(running_pid); then
		rm -f -- "$PIDFILE"
		echo "ZooKeeper not running from $DIR"
		return 0
	fi
	kill -TERM "$pid" 2>/dev/null || true
	local i
	for ((i = 0; i < 150; i++)); do
		alive "$pid" || break
		sleep 0.1
	done
	if alive "$pid"; then
		log "pid $pid ignored SIGTERM; sending SIGKILL"
		kill -KILL "$pid" 2>/dev/null || true
		for ((i = 0; i < 50; i++)); do
			alive "$pid" || break
			sleep 0.1
		done
	fi
	rm -f -- "$PIDFILE"
	echo "ZooKeeper stopped (pid $pid)"
}

cmd_status() {
	parse_opts "$@"
	local pid port
	if ! pid=$(running_pid); then
		echo "ZooKeeper not running from $DIR"
		return 1
	fi
	port=$(sed -n 's/^clientPort=//p' "$DIR/zoo.cfg")
	if [[ $(four_letter "$port" ruok || true) == imok ]]; then
		echo "ZooKeeper running from $DIR (pid $pid) on 127.0.0.1:$port"
		four_letter "$port" srvr || true
	else
		echo "ZooKeeper process $pid from $DIR is not answering on 127.0.0.1:$port"
		return 1
	fi
}

main() {
	[[ $# -ge 1 ]] || usage
	local cmd=$1
	shift
	case $cmd in
	install) cmd_install "$@" ;;
	run) cmd_run "$@" ;;
	start) cmd_start "$@" ;;
	stop) cmd_stop "$@" ;;
	status) cmd_status "$@" ;;
	-h | --help | help) usage ;;
	*) usage ;;
	esac
}

main "$@"

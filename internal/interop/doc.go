// Package interop holds the tests that run zkrecipes' recipes next to
// Apache Curator's on the same ZooKeeper paths: InterProcessMutex against
// mutex, InterProcessReadWriteLock against rwlock with Curator's node
// names, and LeaderLatch against leader. Java contenders
// (testdata/Contender.java, compiled once per run with javac against
// Debian's libcurator-recipes-java) and Go contenders queue on one path in
// both orders of arrival; the tests check exclusion on a log of hold
// intervals both languages append to, first-come first-served order across
// the languages, and that Participants lists Curator's nodes.
//
// The tests need a JDK and Curator's jars in /usr/share/java; `make test`
// installs them (scripts/zk.sh install --curator). Under -short they are
// skipped.
package interop

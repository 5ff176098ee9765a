// Package interop holds the tests that run zkrecipes' recipes next to
// Apache Curator's and kazoo's on the same ZooKeeper paths.
//
// TestCurator: InterProcessMutex against mutex, InterProcessReadWriteLock
// against rwlock with Curator's node names, and LeaderLatch against
// leader. Java contenders (testdata/Contender.java, compiled once per run
// with javac against Debian's libcurator-recipes-java) and Go contenders
// queue on one path in both orders of arrival; the tests check exclusion
// on a log of hold intervals both languages append to, first-come
// first-served order across the languages, and that Participants lists
// Curator's nodes. An InterProcessSemaphoreV2 lease makes every recipe of
// ours refuse its path with recipe.ErrMismatch.
//
// TestKazoo: kazoo's Lock (testdata/kazoo_contender.py, run with Debian's
// /usr/bin/python3 and python3-kazoo) against mutex, the same way, with
// extra_lock_patterns=["-lock-"] for two-way exclusion and without it to
// show that kazoo alone then does not see our nodes; kazoo's ReadLock and
// Election, and a sequential node of an unknown name, make our recipes
// refuse the path.
//
// The tests need a JDK, Curator's jars in /usr/share/java and
// python3-kazoo; `make test` installs them (scripts/zk.sh install
// --curator --kazoo). Under -short they are skipped; TestKazoo is also
// skipped when /usr/bin/python3 cannot import kazoo, unless
// ZKTEST_REQUIRED is set, which makes it fail instead.
package interop

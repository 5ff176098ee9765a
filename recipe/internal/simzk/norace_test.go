//go:build !race

package simzk_test

// raceDetector tells whether the test binary was built with -race.
const raceDetector = false

//go:build race

package recipe

// raceDetector tells whether the test binary was built with -race.
const raceDetector = true

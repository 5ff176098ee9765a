package main

import (
	"context"

	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// newElection returns a participant of the election at path with the given
// id (the library's default, host name:pid, when empty).
func newElection(c *recipe.Client, path, id string) (*leader.Election, error) {
	var opts []leader.Option
	if id != "" {
		opts = append(opts, leader.WithData([]byte(id)))
	}
	return leader.New(c, path, opts...)
}

// currentLeader returns the id of the current leader; the error wraps
// leader.ErrNoLeader when nobody campaigns.
func currentLeader(ctx context.Context, e *leader.Election) (string, error) {
	p, err := e.Leader(ctx)
	return string(p.Data), err
}

// observeLeaders delivers the id of every new leader until ctx ends or
// the observation does; then the channel closes and stopped says why
// (nil when ctx ended).
func observeLeaders(ctx context.Context, e *leader.Election) (ids <-chan string, stopped func() error, err error) {
	o, err := e.Observer(ctx)
	if err != nil {
		return nil, nil, err
	}
	out := make(chan string)
	go func() {
		defer close(out)
		for p := range o.C {
			select {
			case out <- string(p.Data):
			case <-ctx.Done():
			}
		}
	}()
	stopped = func() error {
		if ctx.Err() != nil {
			return nil
		}
		return o.Err()
	}
	return out, stopped, nil
}

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

// observeLeaders delivers the id of every new leader until ctx ends.
func observeLeaders(ctx context.Context, e *leader.Election) (<-chan string, error) {
	ps, err := e.Observe(ctx)
	if err != nil {
		return nil, err
	}
	ids := make(chan string)
	go func() {
		defer close(ids)
		for p := range ps {
			select {
			case ids <- string(p.Data):
			case <-ctx.Done():
			}
		}
	}()
	return ids, nil
}

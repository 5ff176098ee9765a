package main

import (
	"context"
	"time"

	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// This file holds every use of a library name that is about to change, so
// each change is made in one place.

// newElection returns a participant of the election at path with the given
// id (the library's default, host name:pid, when empty).
func newElection(c *recipe.Client, path, id string) (*leader.Election, error) {
	var opts []leader.Option
	if id != "" {
		opts = append(opts, leader.WithID(id))
	}
	return leader.New(c, path, opts...)
}

// currentLeader returns the id of the current leader; the error wraps
// leader.ErrNoLeader when nobody campaigns.
func currentLeader(ctx context.Context, e *leader.Election) (string, error) {
	info, err := e.Leader(ctx)
	return info.ID, err
}

// observeLeaders delivers the id of every new leader until ctx ends.
func observeLeaders(ctx context.Context, e *leader.Election) (<-chan string, error) {
	infos := e.Observe(ctx)
	ids := make(chan string)
	go func() {
		defer close(ids)
		for info := range infos {
			select {
			case ids <- info.ID:
			case <-ctx.Done():
			}
		}
	}()
	return ids, nil
}

// nodeCreated returns when the node of p was created, and false when that
// cannot be read (the node left meanwhile).
func nodeCreated(ctx context.Context, c *recipe.Client, dir string, p recipe.Participant) (time.Time, bool) {
	_, st, err := c.Conn().Exists(dir + "/" + p.Node)
	if err != nil || st == nil || st.Ctime == 0 {
		return time.Time{}, false
	}
	return time.UnixMilli(st.Ctime), true
}

// removeNode deletes the node named node of the lock directory dir,
// whichever session owns it.
func removeNode(ctx context.Context, c *recipe.Client, dir, node string) error {
	return c.Conn().Delete(dir+"/"+node, -1)
}

package leader

import (
	"context"
	"errors"
	"fmt"

	"github.com/zkrecipes/zkrecipes/recipe"
)

// Proclaim replaces the data of the current term's node, which every
// observer sees as the leader's Data ([Election.Leader],
// [Election.Participants], [Election.Observe]), without another election:
// the leader announces something new, such as the address it now serves
// on. It is one write, a guarded transaction ([recipe.Hold.Commit]) that
// applies only while the term is in force: once the term is over (lost,
// resigned, or another participant leads) no Proclaim of it can land.
//
// The data lasts for the term: the node of the next campaign carries the
// participant's identity again (see [WithData]); [Election.ID] does not
// change.
//
// Proclaim checks its input first, without I/O: a nil ctx, empty data or
// data that [WithData] would refuse (more than a request to the servers
// may carry; see recipe.WithMaxPacket) give an error wrapping
// recipe.ErrInvalidArgument. Without a term it returns [ErrNotLeader]
// (which matches recipe.ErrNotHeld), without I/O. Once the term was lost,
// or while the session is suspended, it returns an error wrapping [ErrLost]
// and the reason, with the data unchanged; a term whose node the server no
// longer has ends with that loss. An error wrapping recipe.ErrCommitUnknown
// means the write was sent but its reply never came: it may have been
// applied, while the term was in force, or not; read the leader's data
// ([Election.Leader]) to tell, or Proclaim again.
func (e *Election) Proclaim(ctx context.Context, data []byte) error {
	if ctx == nil {
		return fmt.Errorf("leader: proclaim: %w: nil context", recipe.ErrInvalidArgument)
	}
	if len(data) == 0 {
		return fmt.Errorf("leader: proclaim: %w: empty data", recipe.ErrInvalidArgument)
	}
	// The rule of WithData, which New checks: the data must fit in a
	// request with the node's path.
	if _, err := recipe.NewLock(e.c, e.Path(), e.lk.Spec(), data); err != nil {
		return fmt.Errorf("leader: proclaim: %w", err)
	}
	h := e.current()
	if h == nil {
		return ErrNotLeader
	}
	_, err := h.Commit(ctx, recipe.SetData(e.Path()+"/"+h.Node(), data))
	switch {
	case err == nil:
		return nil
	case errors.Is(err, recipe.ErrNotHeld):
		return ErrNotLeader
	}
	return fmt.Errorf("leader: proclaim %s: %w", e.Path(), err)
}

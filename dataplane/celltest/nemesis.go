package celltest

import (
	"fmt"
	"math/rand"
)

// Fault is one kind of failure a Nemesis injects.
type Fault int

// The faults of the fault tests.
const (
	// LeaderKill stops the broker leading a partition and restarts it
	// from its data directory at heal.
	LeaderKill Fault = iota
	// FollowerKill does the same to a broker that follows.
	FollowerKill
	// LeaderPartition cuts the leader's broker off from both others.
	LeaderPartition
	// CellRestart stops every broker and restarts them all from disk.
	CellRestart
	// LeaderCrash cuts the power of the leader's broker: writes it had
	// not made durable are lost or torn (CrashBroker). It restarts at
	// heal.
	LeaderCrash
	// CellCrash cuts the power of every broker at once, then restarts
	// them: only what a majority made durable must survive.
	CellCrash
	numFaults
)

func (f Fault) String() string {
	switch f {
	case LeaderKill:
		return "leader-kill"
	case FollowerKill:
		return "follower-kill"
	case LeaderPartition:
		return "leader-partition"
	case CellRestart:
		return "cell-restart"
	case LeaderCrash:
		return "leader-crash"
	case CellCrash:
		return "cell-crash"
	}
	return fmt.Sprintf("Fault(%d)", int(f))
}

// RandomFault picks a fault.
func RandomFault(rng *rand.Rand) Fault { return Fault(rng.Intn(int(numFaults))) }

// Inject applies f to the cell, aimed at partition part's current leader
// (or any broker if there is none), and returns the function that heals
// it. CellRestart and CellCrash restart at once; their heal is a no-op.
func (c *Cell) Inject(rng *rand.Rand, f Fault, part int) (desc string, heal func()) {
	leader := c.Leader(part)
	if leader < 0 {
		leader = rng.Intn(c.Brokers())
	}
	switch f {
	case LeaderKill:
		c.StopBroker(leader)
		return fmt.Sprintf("kill leader b%d", leader), func() { c.StartBroker(leader) }
	case FollowerKill:
		b := (leader + 1 + rng.Intn(c.Brokers()-1)) % c.Brokers()
		c.StopBroker(b)
		return fmt.Sprintf("kill follower b%d", b), func() { c.StartBroker(b) }
	case LeaderPartition:
		c.Network().Isolate(leader)
		return fmt.Sprintf("isolate leader b%d", leader), c.Network().Heal
	case CellRestart:
		for b := 0; b < c.Brokers(); b++ {
			c.StopBroker(b)
		}
		for b := 0; b < c.Brokers(); b++ {
			c.StartBroker(b)
		}
		return "restart the whole cell", func() {}
	case LeaderCrash:
		c.CrashBroker(leader, rng)
		return fmt.Sprintf("crash leader b%d", leader), func() { c.StartBroker(leader) }
	case CellCrash:
		for b := 0; b < c.Brokers(); b++ {
			c.CrashBroker(b, rng)
		}
		for b := 0; b < c.Brokers(); b++ {
			c.StartBroker(b)
		}
		return "crash the whole cell", func() {}
	}
	panic(fmt.Sprintf("unknown fault %v", f))
}

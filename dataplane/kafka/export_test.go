package kafka

import "net"

// MakeBatch is makeBatch for the external tests.
var MakeBatch = makeBatch

// SetBeforeFetchWrite makes a server built from cfg call f with the
// client's connection after computing each fetch response and before
// writing it.
func SetBeforeFetchWrite(cfg *Config, f func(net.Conn)) { cfg.beforeFetchWrite = f }

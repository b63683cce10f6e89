// Package transport owns the broker-to-broker Raft transport of the data
// plane: one listener per broker, a few shared TCP connections ("lanes") per
// peer broker, and a per-group raft.Transport that tags every frame with its
// Raft group id so the hundreds of partition groups of a broker share those
// connections. It also owns the wire codec of the Raft RPCs, the fault
// injection used by cell tests (Faults) and the Raft timeouts suited to many
// groups per broker (RaftConfig).
//
// # Authentication
//
// Whoever can send frames to a Raft listener can append to logs, rewrite
// committed offsets and unseat leaders, so every connection is mutually
// authenticated with TLS 1.3 and certificates of a per-cell CA
// (dataplane/peercert). Each broker's certificate names its Raft server id
// (URI SAN sluice://cell/<cell>/node/<id>). A shared secret (an HMAC key
// in the hello, say) was rejected: every holder of it could claim any id,
// so one leaked broker could impersonate all of them. A per-broker
// certificate binds the id to the credential, can be revoked alone by
// rotating it out, and TLS encrypts the traffic too.
//
// A connection opens with a clear hello (magic, version, lane, the dialer's
// server id) that tools in the path (the chaos proxy) read, then the TLS
// handshake, then the same hello again inside TLS, which must match. The
// acceptor requires a client certificate chained to the cell CA, of its
// cell, naming the id the hello claims; the dialer requires the server's
// certificate to name the id it meant to dial (host names are not checked:
// the id is what Raft addresses). A refused connection is closed and
// logged with the remote address and the reason.
//
// Each request is then checked before its group sees it
// (GroupTransport.SetMembers): the authenticated peer must be in the
// group's current configuration (voters and non-voters), and the server id
// (and address) the RPC names as its sender must be the peer's; otherwise
// the answer is ErrRefused. A group whose membership is not set refuses
// everything.
//
// A broker of another cell may open one lane only, the mirror lane, if
// this cell's state grants its cell (SetMirrorGrants): a certificate
// chained to that cell's CA, then only the mirror read RPCs of granted
// topics (mirror.go, grant.go); never a Raft or segment RPC.
//
// Only dataplane packages (the partition replication layer and the cell test
// harness) and tenantd's wiring may import it; the control plane never does.
package transport

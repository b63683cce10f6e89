package wire

// Registration is what a broker tells the control plane about itself when
// it starts (PUT /internal/v1/cells/{cell}/brokers/{id}, with its cell
// key): its node id and the addresses it advertises. The control plane adds
// the broker to the cell if the cell has none by that id, or updates its
// addresses if the node id matches; a different node id is refused. Empty
// addresses leave what the cell state lists.
type Registration struct {
	NodeID    int    `json:"node_id"`
	KafkaAddr string `json:"kafka_addr,omitempty"`
	HTTPAddr  string `json:"http_addr,omitempty"`
	RaftAddr  string `json:"raft_addr,omitempty"`
	// PeerCA is the broker's Raft transport CA certificate in PEM (the
	// cell's peer CA), which the control plane publishes to other cells
	// for tenant moves; empty from a broker without transport TLS. Every
	// broker of a cell must register the same one.
	PeerCA string `json:"peer_ca,omitempty"`
}

// Package httpapi is a broker's HTTP data API: publish and read messages
// and consume them in consumer groups with JSON over HTTP (echo), on every
// broker of a cell. It imports the data plane's state, log, records and
// groups packages and the control plane's public leaf packages; tenantd
// wires it.
//
// # Conventions
//
// Authentication is HTTP basic with an API key (key id as the user name,
// secret as the password), checked against the broker's cached cell state
// like SASL/PLAIN on the Kafka listener. ACLs apply as on the Kafka
// listener: publishing needs topic write, reading topic read, the group
// endpoints group read plus topic read. Names are tenant scoped: another
// tenant's topic or group answers exactly as a missing one. Keys, values
// and header values are base64 (standard, padded); null is a null key or
// value. Errors are the catalogue's {"code", "message", "retriable"} with
// its HTTP status; bodies are decoded strictly (unknown fields, trailing
// data, wrong types and bodies over 16 MiB are refused). ':' in a path
// may be sent as %3A.
//
// Any broker answers any request: one that does not lead the partition,
// or coordinate the group, forwards the request to the broker that does
// (with the caller's own credentials, a bounded timeout and at most two
// hops) and returns its answer; a retriable 503 not_leader when there is
// none right now. With Config.TLS the API serves HTTPS only, and forwards
// dial https, verifying the other broker against Config.ForwardCAs.
//
// Any cell answers any tenant's request: with Config.Homes, a valid key of
// a tenant homed on another cell has its request proxied to a broker of
// that cell (follow.go), whose answer is returned with a Sluice-Home-Cell
// header naming it; a retriable 503 unavailable when that cell cannot be
// reached. While a tenant moving to this cell has its groups held, the
// group endpoints answer a retriable 503 coordinator_loading.
//
// # Topics and partitions
//
//	POST /v1/topics/{topic}/messages:publish
//	  {"messages":[{"key":b64|null,"value":b64|null,"headers":[{"key":s,"value":b64|null}],
//	                "partition":n?,"message_id":s?}],
//	   "producer_id":n?,"producer_epoch":n?,"base_sequence":n?}
//	  → 200 {"messages":[{"partition","offset","message_id"}]}   (request order)
//
// A message goes to its partition, else its key's (Kafka's murmur2
// partitioner, so Kafka clients and HTTP agree), else one partition chosen
// round robin per request for all its null-key messages. Its message id
// (given, or a new UUID) travels in the record header sluice-message-id.
// The messages of one partition are one record batch, which must fit the
// topic's max.message.bytes (413 message_too_large). When some partitions
// commit and others fail the answer is 207 with an error per message;
// when all fail, the error. Idempotent publishes take a producer id from
// POST /v1/producer-ids ({"producer_id","producer_epoch":0}), go to one
// partition, and number messages from base_sequence, continuing from the
// last publish's base_sequence + count; a retry with the same numbers is
// not appended twice and answers the original offsets.
//
//	GET /v1/topics/{topic}/partitions/{p}/messages?offset=n|earliest|latest&max_bytes=&max_wait_ms=
//	  → 200 {"messages":[{"partition","offset","timestamp_ms","key","value","headers","message_id"}],
//	         "next_offset","high_watermark","log_start_offset"}
//
// Reads return committed messages (below the high watermark) from offset,
// about max_bytes of record batches (default 1 MiB, at least one batch),
// waiting up to max_wait_ms (at most 30 s) while there are none. Batches
// compressed by Kafka clients (gzip, snappy, lz4, zstd) are decoded. An
// offset outside the retained range is 416 offset_out_of_range.
//
//	GET /v1/topics/{topic}/partitions/{p}/offsets?timestamp_ms=
//	  → 200 {"log_start_offset","high_watermark","offset"}   (offset: first at or after the time)
//	POST /v1/topics/{topic}/partitions/{p}/records:delete {"before_offset":n}
//	  → 200 {"log_start_offset"}   (Kafka's DeleteRecords; -1: the high watermark; needs delete)
//
// # Consumer groups
//
// An HTTP consumer is a member of a Kafka consumer group (protocol
// "consumer", range assignor), so it can share a group with Kafka
// clients. The coordinator broker keeps each HTTP member's partitions and
// fetch positions in memory and rebuilds them from the group's durable
// state (assignment, committed offsets and their metadata) when it takes
// a group over.
//
//	POST /v1/groups/{group}/members
//	  {"topics":[s],"member_id":s?,"session_timeout_ms":n?,"rebalance_timeout_ms":n?,
//	   "auto_offset_reset":"earliest"|"latest"?}
//	  → 200 {"member_id","generation","leader","partitions":[{"topic","partition"}],"session_timeout_ms"}
//	DELETE /v1/groups/{group}/members/{member_id} → 204
//
// Join blocks until the group's rebalance completes. Every fetch, commit
// and nack is a heartbeat (session timeout default 30 s, from 6 s to 30
// min). When the group rebalances (a member joins or leaves), the members'
// next call answers 409 rebalance_in_progress: join again with the same
// member_id to get the new generation and partitions. A member that stops
// calling for its session timeout is removed.
//
//	POST /v1/groups/{group}/messages:fetch  {"member_id","generation","max_bytes"?,"max_wait_ms"?}
//	  → 200 {"messages":[{"topic","partition","offset",...,"delivery_attempt"?}],
//	         "partitions":[{"topic","partition","position","high_watermark","retry_offset"?,"retry_at_ms"?,"error"?}]}
//
// Positions start at the group's committed offsets (or earliest/latest as
// the member joined with, default earliest) and advance with each fetch,
// so delivery is at least once: commit what was processed. high_watermark
// is the partition's as last read (-1 before its first read). A
// partition that cannot be read (its leader refuses or is unreachable)
// is tried again within the long poll; a fetch without messages while one
// still cannot be read answers that error (503 not_leader, 429 with
// Retry-After, …) rather than an empty 200; a fetch with messages marks
// such partitions with "error" {code, message, retriable}.
//
//	POST /v1/groups/{group}/offsets:commit {"member_id","generation","offsets":[{"topic","partition","offset"}]}
//
// offset is the next message to process (Kafka's convention). A commit
// from an older generation is 409 illegal_generation.
//
//	POST /v1/groups/{group}/offsets:reset
//	  {"topic","partitions":[n]?,"to":"earliest"|"latest"|"offset"|"timestamp","offset"?,"timestamp_ms"?}
//
// Like Kafka's admin reset it is refused (409 group_not_empty) while the
// group has members.
//
//	POST /v1/groups/{group}/messages:nack {"member_id","generation","topic","partition","offset","error"?}
//	  → 200 {"action":"retry","attempts","retry_at_ms"} | {"action":"dead_letter","attempts","dead_letter":{"topic","partition","offset"}}
//
// A nack of an offset not yet delivered since the member's position was
// last set (after a coordinator failover, positions restart at the
// committed offset) answers {"action":"redeliver"}: the message comes
// again without counting an attempt. Otherwise retries block the partition: its position rewinds to the nacked
// message, and nothing of the partition is delivered before a backoff of
// 1 s, doubling per attempt up to 1 min. The attempt count and retry time
// are committed as the offset's metadata, so they survive a coordinator
// failover. After the 5th failed delivery the message goes to the
// group's dead-letter topic "<group>.dlq" (created with one partition, with
// the caller's key, on first use; a key whose ACLs refuse create on it, or
// on the cluster, gets 403 topic_access_denied) with its key, value, headers and message
// id plus the headers sluice-dlq-topic, sluice-dlq-partition,
// sluice-dlq-offset, sluice-dlq-attempts and sluice-dlq-error; the group
// then moves past it. A message is dead-lettered once even when the
// coordinator moves in between: the nack repeated at the next
// coordinator finds the dead letter already published and answers it.
//
//	POST /v1/groups/{group}/dead-letters:redrive {"max_messages":n?}  → 200 {"redriven","remaining"}
//
// Redrive publishes dead letters back to their original topic and
// partition with their message ids, in order, up to max_messages (default
// 100, at most 1000) per call; its progress is the committed offsets of
// the group "<group>.dlq.redrive".
//
// # Operations
//
// Config.Registerer gets the API's Prometheus metrics: requests by route,
// method and status, latency, rejections by catalogue code, forwards, and
// messages and bytes published. The data port does not serve them (it is
// the tenants' port); tenantd serves them with the broker's. Config.Admit is the one place a tenant's
// publish, read or group fetch is admitted (quotas), before it moves
// anything, on the broker where it entered the cell, and Config.Record
// the one place what it moved is counted, where it moved; an error Admit
// returns with a RetryAfter() method sets Retry-After. A request another
// broker forwarded, proven with Config.PeerKey (peer.go), is admitted
// with Admission.Forwarded set: its request was counted where it
// entered. AdmitWith builds both over a broker's admission.Admission
// (tenantd does): over its throughput or request rate a tenant gets 429
// throughput_quota_exceeded or request_rate_exceeded with Retry-After,
// the true wait rounded up to seconds (the message names it to the
// millisecond); a refusal does not lengthen the wait. Every 429 carries
// Retry-After.
package httpapi

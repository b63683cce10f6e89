// Package catalog is Sluice's one error catalogue: every rejection the control
// plane, the data plane, the console and the Terraform provider report comes
// from here, with its HTTP status, Kafka error code and retriability.
//
// Any package may import it; it imports nothing of Sluice's.
//
// What the caller sees and what the log gets are separate: an *Error carries a
// caller-safe Message (never another tenant's identifiers) and, optionally, the
// wrapped Cause for the log.
package catalog

import (
	"errors"
	"fmt"
	"net/http"
)

// Code names one kind of failure. Callers match on codes, never on messages.
type Code string

// Entry describes one code of the catalogue.
type Entry struct {
	Code        Code
	HTTPStatus  int
	KafkaCode   int16 // 0 when the failure has no Kafka counterpart beyond UNKNOWN_SERVER_ERROR (-1)
	Retriable   bool
	Description string
}

// Kafka error codes used below (from the Kafka protocol's error table).
const (
	kafkaUnknownServerError         int16 = -1
	kafkaCorruptMessage             int16 = 2
	kafkaUnknownTopicOrPartition    int16 = 3
	kafkaInvalidFetchSize           int16 = 4
	kafkaLeaderNotAvailable         int16 = 5
	kafkaNotLeaderOrFollower        int16 = 6
	kafkaMessageTooLarge            int16 = 10
	kafkaInvalidTopic               int16 = 17
	kafkaRecordListTooLarge         int16 = 18
	kafkaNotEnoughReplicas          int16 = 19
	kafkaIllegalGeneration          int16 = 22
	kafkaTopicAuthorizationFailed   int16 = 29
	kafkaGroupAuthorizationFailed   int16 = 30
	kafkaClusterAuthorizationFailed int16 = 31
	kafkaUnsupportedSaslMechanism   int16 = 33
	kafkaTopicAlreadyExists         int16 = 36
	kafkaInvalidPartitions          int16 = 37
	kafkaInvalidReplicationFactor   int16 = 38
	kafkaInvalidRequest             int16 = 42
	kafkaPolicyViolation            int16 = 44
	kafkaInvalidConfig              int16 = 40
	kafkaSaslAuthenticationFailed   int16 = 58
	kafkaThrottlingQuotaExceeded    int16 = 89
	kafkaKafkaStorageError          int16 = 56
	kafkaGroupIDNotFound            int16 = 69
	kafkaResourceNotFound           int16 = 91
	kafkaBrokerNotAvailable         int16 = 8
	kafkaCoordinatorNotAvailable    int16 = 15
	kafkaOffsetOutOfRange           int16 = 1
	kafkaInvalidRecord              int16 = 87
	kafkaRequestTimedOut            int16 = 7
	kafkaUnsupportedVersion         int16 = 35
	kafkaFencedLeaderEpoch          int16 = 74
	kafkaUnknownLeaderEpoch         int16 = 75
	kafkaOutOfOrderSequenceNumber   int16 = 45
	kafkaInvalidProducerEpoch       int16 = 47
	// Consumer groups.
	kafkaOffsetMetadataTooLarge int16 = 12
	kafkaCoordinatorLoading     int16 = 14
	kafkaNotCoordinator         int16 = 16
	kafkaInconsistentProtocol   int16 = 23
	kafkaInvalidGroupID         int16 = 24
	kafkaUnknownMemberID        int16 = 25
	kafkaInvalidSessionTimeout  int16 = 26
	kafkaRebalanceInProgress    int16 = 27
	kafkaGroupNotEmpty          int16 = 68
	kafkaMemberIDRequired       int16 = 79
	kafkaFencedInstanceID       int16 = 82
	kafkaGroupSubscribedToTopic int16 = 86
)

// The catalogue. Codes are stable API: add new ones, never rename.
var (
	InvalidRequest       = def("invalid_request", http.StatusBadRequest, kafkaInvalidRequest, false, "the request is not valid")
	MalformedJSON        = def("malformed_json", http.StatusBadRequest, kafkaInvalidRequest, false, "the request body is not valid JSON")
	UnknownField         = def("unknown_field", http.StatusBadRequest, kafkaInvalidRequest, false, "the request body has a field this API does not know")
	BodyTooLarge         = def("body_too_large", http.StatusRequestEntityTooLarge, kafkaRecordListTooLarge, false, "the request body is larger than allowed")
	InvalidName          = def("invalid_name", http.StatusBadRequest, kafkaInvalidTopic, false, "the name is not valid")
	InvalidConfig        = def("invalid_config", http.StatusBadRequest, kafkaInvalidConfig, false, "a configuration value is not valid")
	InvalidPartitions    = def("invalid_partitions", http.StatusBadRequest, kafkaInvalidPartitions, false, "the partition count is not valid")
	PartitionsShrink     = def("partitions_cannot_shrink", http.StatusBadRequest, kafkaInvalidPartitions, false, "a topic's partition count can only grow")
	InvalidPageToken     = def("invalid_page_token", http.StatusBadRequest, kafkaInvalidRequest, false, "the page token is not valid")
	NotFound             = def("not_found", http.StatusNotFound, kafkaResourceNotFound, false, "no such resource")
	MethodNotAllowed     = def("method_not_allowed", http.StatusMethodNotAllowed, kafkaInvalidRequest, false, "the route does not take this method")
	TopicNotFound        = def("topic_not_found", http.StatusNotFound, kafkaUnknownTopicOrPartition, false, "no such topic")
	GroupNotFound        = def("group_not_found", http.StatusNotFound, kafkaGroupIDNotFound, false, "no such consumer group")
	AlreadyExists        = def("already_exists", http.StatusConflict, kafkaInvalidRequest, false, "the resource already exists")
	TopicAlreadyExists   = def("topic_already_exists", http.StatusConflict, kafkaTopicAlreadyExists, false, "the topic already exists")
	Unauthenticated      = def("unauthenticated", http.StatusUnauthorized, kafkaSaslAuthenticationFailed, false, "credentials are missing or wrong")
	KeyRevoked           = def("key_revoked", http.StatusUnauthorized, kafkaSaslAuthenticationFailed, false, "the API key has been revoked")
	KeyExpired           = def("key_expired", http.StatusUnauthorized, kafkaSaslAuthenticationFailed, false, "the API key has expired")
	SessionExpired       = def("session_expired", http.StatusUnauthorized, kafkaSaslAuthenticationFailed, false, "the session has expired; sign in again")
	PermissionDenied     = def("permission_denied", http.StatusForbidden, kafkaClusterAuthorizationFailed, false, "the caller may not do this")
	TopicAccessDenied    = def("topic_access_denied", http.StatusForbidden, kafkaTopicAuthorizationFailed, false, "the caller may not use this topic")
	GroupAccessDenied    = def("group_access_denied", http.StatusForbidden, kafkaGroupAuthorizationFailed, false, "the caller may not use this consumer group")
	TenantSuspended      = def("tenant_suspended", http.StatusForbidden, kafkaClusterAuthorizationFailed, false, "the tenant is suspended")
	RateLimited          = def("rate_limited", http.StatusTooManyRequests, kafkaThrottlingQuotaExceeded, true, "too many requests; retry later")
	QuotaExceeded        = def("quota_exceeded", http.StatusUnprocessableEntity, kafkaPolicyViolation, false, "the tenant's quota does not allow this")
	ReplicationFactor    = def("invalid_replication_factor", http.StatusBadRequest, kafkaInvalidReplicationFactor, false, "the replication factor is not valid")
	MessageTooLarge      = def("message_too_large", http.StatusRequestEntityTooLarge, kafkaMessageTooLarge, false, "a message is larger than the topic allows")
	CorruptMessage       = def("corrupt_message", http.StatusBadRequest, kafkaCorruptMessage, false, "a record batch failed validation")
	InvalidRecord        = def("invalid_record", http.StatusBadRequest, kafkaInvalidRecord, false, "a record breaks the topic's rules (a compacted topic needs a key on every record)")
	NoCapacity           = def("no_capacity", http.StatusServiceUnavailable, kafkaBrokerNotAvailable, true, "no cell can take this placement now")
	NotLeader            = def("not_leader", http.StatusServiceUnavailable, kafkaNotLeaderOrFollower, true, "this broker does not lead the partition")
	LeaderNotAvailable   = def("leader_not_available", http.StatusServiceUnavailable, kafkaLeaderNotAvailable, true, "the partition has no serving leader right now (an election is under way); retry shortly")
	NotEnoughReplicas    = def("not_enough_replicas", http.StatusServiceUnavailable, kafkaNotEnoughReplicas, true, "too few replicas are available")
	CoordinatorNotReady  = def("coordinator_not_available", http.StatusServiceUnavailable, kafkaCoordinatorNotAvailable, true, "the group coordinator is not available")
	DiskFull             = def("disk_full", http.StatusInsufficientStorage, kafkaKafkaStorageError, true, "the broker's disk is above its hard watermark")
	IllegalGeneration    = def("illegal_generation", http.StatusConflict, kafkaIllegalGeneration, false, "the consumer-group generation is stale")
	UnsupportedMechanism = def("unsupported_sasl_mechanism", http.StatusBadRequest, kafkaUnsupportedSaslMechanism, false, "the SASL mechanism is not supported")
	InvalidFetchSize     = def("invalid_fetch_size", http.StatusBadRequest, kafkaInvalidFetchSize, false, "the fetch size is not valid")
	Unavailable          = def("unavailable", http.StatusServiceUnavailable, kafkaUnknownServerError, true, "the service is temporarily unavailable")
	OffsetOutOfRange     = def("offset_out_of_range", http.StatusRequestedRangeNotSatisfiable, kafkaOffsetOutOfRange, false, "the offset is outside the partition's retained range")
	RequestTimedOut      = def("request_timed_out", http.StatusGatewayTimeout, kafkaRequestTimedOut, true, "the request timed out before it was committed")
	UnsupportedVersion   = def("unsupported_version", http.StatusBadRequest, kafkaUnsupportedVersion, false, "this version of the request is not supported")
	FencedLeaderEpoch    = def("fenced_leader_epoch", http.StatusConflict, kafkaFencedLeaderEpoch, true, "the leader epoch in the request is older than the partition's")
	UnknownLeaderEpoch   = def("unknown_leader_epoch", http.StatusConflict, kafkaUnknownLeaderEpoch, true, "the leader epoch in the request is newer than the partition's")
	OutOfOrderSequence   = def("out_of_order_sequence", http.StatusConflict, kafkaOutOfOrderSequenceNumber, false, "the producer's sequence number does not follow its previous batch")
	InvalidProducerEpoch = def("invalid_producer_epoch", http.StatusConflict, kafkaInvalidProducerEpoch, false, "the producer was fenced by a newer epoch of the same producer id")
	// Consumer groups (the coordinator's answers; Kafka's codes).
	NotCoordinator         = def("not_coordinator", http.StatusServiceUnavailable, kafkaNotCoordinator, true, "this broker does not coordinate the consumer group; find the coordinator again")
	CoordinatorLoading     = def("coordinator_loading", http.StatusServiceUnavailable, kafkaCoordinatorLoading, true, "the group coordinator is still loading the group's state; retry shortly")
	UnknownMember          = def("unknown_member", http.StatusConflict, kafkaUnknownMemberID, false, "the member id is not a member of the consumer group; join again")
	RebalanceInProgress    = def("rebalance_in_progress", http.StatusConflict, kafkaRebalanceInProgress, true, "the consumer group is rebalancing; join again")
	FencedInstance         = def("fenced_instance_id", http.StatusConflict, kafkaFencedInstanceID, false, "a newer member with the same group instance id replaced this one")
	MemberIDRequired       = def("member_id_required", http.StatusConflict, kafkaMemberIDRequired, false, "join again with the member id given in this answer")
	GroupNotEmpty          = def("group_not_empty", http.StatusConflict, kafkaGroupNotEmpty, false, "the consumer group still has members")
	InconsistentProtocol   = def("inconsistent_group_protocol", http.StatusConflict, kafkaInconsistentProtocol, false, "the member's protocol type or protocols do not match the consumer group's")
	InvalidGroupID         = def("invalid_group_id", http.StatusBadRequest, kafkaInvalidGroupID, false, "the consumer group id is not valid")
	InvalidSessionTimeout  = def("invalid_session_timeout", http.StatusBadRequest, kafkaInvalidSessionTimeout, false, "the session timeout is outside the range the broker allows")
	OffsetMetadataTooLarge = def("offset_metadata_too_large", http.StatusRequestEntityTooLarge, kafkaOffsetMetadataTooLarge, false, "the offset commit's metadata is too large")
	GroupSubscribedToTopic = def("group_subscribed_to_topic", http.StatusConflict, kafkaGroupSubscribedToTopic, false, "the consumer group's members are subscribed to the topic; its offsets cannot be deleted")
	// Tenant isolation in the data plane (dataplane/admission).
	ThroughputExceeded   = def("throughput_quota_exceeded", http.StatusTooManyRequests, kafkaThrottlingQuotaExceeded, true, "the tenant is over its produce or fetch rate; retry after the time given")
	RequestRateExceeded  = def("request_rate_exceeded", http.StatusTooManyRequests, kafkaThrottlingQuotaExceeded, true, "the tenant is over its request rate; retry after the time given")
	ConnectionLimit      = def("connection_limit_exceeded", http.StatusTooManyRequests, kafkaPolicyViolation, true, "the tenant has as many connections to this broker as its quota allows")
	StorageQuotaExceeded = def("storage_quota_exceeded", http.StatusInsufficientStorage, kafkaPolicyViolation, false, "the tenant's stored bytes reached its storage quota; delete data, shorten retention or raise the quota")
	CellDiskPressure     = def("cell_disk_pressure", http.StatusServiceUnavailable, kafkaPolicyViolation, true, "a broker of the tenant's cell is above its soft disk watermark, so no new partitions are placed there now")
	Internal             = def("internal", http.StatusInternalServerError, kafkaUnknownServerError, false, "an internal error occurred")
)

var entries = map[Code]*Entry{}

func def(code Code, status int, kafka int16, retriable bool, desc string) *Entry {
	if _, dup := entries[code]; dup {
		panic("catalog: duplicate code " + string(code))
	}
	e := &Entry{Code: code, HTTPStatus: status, KafkaCode: kafka, Retriable: retriable, Description: desc}
	entries[code] = e
	return e
}

// Lookup returns the entry for code, or nil.
func Lookup(code Code) *Entry { return entries[code] }

// All returns every entry of the catalogue, for documentation and tests.
func All() []*Entry {
	out := make([]*Entry, 0, len(entries))
	for _, e := range entries {
		out = append(out, e)
	}
	return out
}

// Error is a catalogued failure: what the caller sees ({code, message}) plus an
// optional cause for the log.
type Error struct {
	Entry   *Entry
	Message string // caller-safe; defaults to the entry's description
	Cause   error  // for the log only
}

func (e *Error) Error() string {
	if e.Cause != nil {
		return fmt.Sprintf("%s: %s: %v", e.Entry.Code, e.Message, e.Cause)
	}
	return fmt.Sprintf("%s: %s", e.Entry.Code, e.Message)
}

func (e *Error) Unwrap() error { return e.Cause }

// Is reports whether target is an *Error of the same code, so that
// errors.Is(err, catalog.NotFound.New("")) style checks work.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Entry == e.Entry
}

// New returns an error of this entry with a caller-safe message; an empty
// message means the entry's description.
func (e *Entry) New(msg string) *Error {
	if msg == "" {
		msg = e.Description
	}
	return &Error{Entry: e, Message: msg}
}

// Newf is New with formatting.
func (e *Entry) Newf(format string, args ...any) *Error {
	return e.New(fmt.Sprintf(format, args...))
}

// Wrap returns an error of this entry carrying cause for the log.
func (e *Entry) Wrap(cause error, msg string) *Error {
	err := e.New(msg)
	err.Cause = cause
	return err
}

// Of returns the catalogued form of err: err itself when it is (or wraps) an
// *Error, otherwise Internal wrapping it.
func Of(err error) *Error {
	var ce *Error
	if errors.As(err, &ce) {
		return ce
	}
	return Internal.Wrap(err, "")
}

// Has reports whether err is (or wraps) an error of entry e.
func Has(err error, e *Entry) bool {
	var ce *Error
	return errors.As(err, &ce) && ce.Entry == e
}

package kafka

import (
	"github.com/sluicehq/sluice/contract/catalog"
	"github.com/sluicehq/sluice/dataplane/frontdoor"
)

// catalogued is the front doors' one mapping of the partition layer's
// errors onto the catalogue.
func catalogued(err error) *catalog.Error { return frontdoor.Catalogued(err) }

// errCode is the Kafka error code and the caller-safe message of err; code
// 0 and no message for nil.
func errCode(err error) (int16, *string) {
	if err == nil {
		return 0, nil
	}
	ce := catalogued(err)
	msg := ce.Message
	if msg == "" {
		msg = ce.Entry.Description
	}
	return ce.Entry.KafkaCode, &msg
}

// entryCode is the Kafka code and message of a catalogue entry.
func entryCode(e *catalog.Entry, msg string) (int16, *string) {
	if msg == "" {
		msg = e.Description
	}
	return e.KafkaCode, &msg
}

package groups

import (
	"errors"

	"github.com/sluicehq/sluice/contract/catalog"
)

// Errors of the coordinator. Each is a *catalog.Error, so errors.Is
// matches any error of the same catalogue entry (the coordinator may add a
// specific message), and every front door maps it with the catalogue.
var (
	ErrNotCoordinator         = catalog.NotCoordinator.New("")
	ErrCoordinatorLoading     = catalog.CoordinatorLoading.New("")
	ErrCoordinatorUnavailable = catalog.CoordinatorNotReady.New("")
	ErrUnknownMember          = catalog.UnknownMember.New("")
	ErrIllegalGeneration      = catalog.IllegalGeneration.New("")
	ErrRebalanceInProgress    = catalog.RebalanceInProgress.New("")
	ErrFencedInstance         = catalog.FencedInstance.New("")
	ErrMemberIDRequired       = catalog.MemberIDRequired.New("")
	ErrGroupNotEmpty          = catalog.GroupNotEmpty.New("")
	ErrGroupNotFound          = catalog.GroupNotFound.New("")
	ErrInconsistentProtocol   = catalog.InconsistentProtocol.New("")
	ErrInvalidSessionTimeout  = catalog.InvalidSessionTimeout.New("")
	ErrInvalidGroupID         = catalog.InvalidGroupID.New("")
	ErrMetadataTooLarge       = catalog.OffsetMetadataTooLarge.New("")
)

// KafkaCode is the Kafka error code of err: 0 for nil, the catalogue
// entry's code for a catalogued error, UNKNOWN_SERVER_ERROR (-1) otherwise.
func KafkaCode(err error) int16 {
	if err == nil {
		return 0
	}
	var ce *catalog.Error
	if errors.As(err, &ce) {
		return ce.Entry.KafkaCode
	}
	return -1
}

package controlplane

import (
	"net/mail"
	"regexp"
	"strings"

	"github.com/sluicehq/sluice/contract/catalog"
)

var (
	// Tenant names are DNS-label-like: they may appear in hostnames later.
	tenantNameRE = regexp.MustCompile(`^[a-z][a-z0-9-]{1,38}[a-z0-9]$`)
	// Operator-chosen ids of pools, cells and brokers.
	fleetIDRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)
)

func validTenantName(name string) error {
	if !tenantNameRE.MatchString(name) {
		return catalog.InvalidName.New("a tenant name has 3 to 40 characters: lowercase letters, digits and hyphens, starting with a letter and not ending with a hyphen")
	}
	return nil
}

func validFleetID(kind, id string) error {
	if !fleetIDRE.MatchString(id) {
		return catalog.InvalidName.Newf("a %s id has 1 to 63 characters: lowercase letters, digits and hyphens", kind)
	}
	return nil
}

// validBroker checks a broker's id and node id, as an operator creates the
// broker or the broker registers itself.
func validBroker(id string, nodeID int) error {
	if err := validFleetID("broker", id); err != nil {
		return err
	}
	if nodeID < 1 || nodeID > 1<<20 {
		return catalog.InvalidRequest.New("node_id must be from 1 to 1048576")
	}
	return nil
}

func normalizeEmail(email string) (string, error) {
	email = strings.TrimSpace(strings.ToLower(email))
	a, err := mail.ParseAddress(email)
	if err != nil || a.Address != email || len(email) > 254 {
		return "", catalog.InvalidRequest.New("the email address is not valid")
	}
	return email, nil
}

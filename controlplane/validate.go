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

func normalizeEmail(email string) (string, error) {
	email = strings.TrimSpace(strings.ToLower(email))
	a, err := mail.ParseAddress(email)
	if err != nil || a.Address != email || len(email) > 254 {
		return "", catalog.InvalidRequest.New("the email address is not valid")
	}
	return email, nil
}

package catalog

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"testing"
)

var codeRE = regexp.MustCompile(`^[a-z][a-z_]+$`)

func TestEntries(t *testing.T) {
	for _, e := range All() {
		if !codeRE.MatchString(string(e.Code)) {
			t.Errorf("code %q is not snake_case", e.Code)
		}
		if http.StatusText(e.HTTPStatus) == "" || e.HTTPStatus < 400 {
			t.Errorf("%s: HTTP status %d is not an error status", e.Code, e.HTTPStatus)
		}
		if e.KafkaCode == 0 {
			t.Errorf("%s: no Kafka error code", e.Code)
		}
		if e.Description == "" {
			t.Errorf("%s: no description", e.Code)
		}
		if Lookup(e.Code) != e {
			t.Errorf("%s: Lookup disagrees", e.Code)
		}
	}
}

func TestWrapAndMatch(t *testing.T) {
	cause := errors.New("disk on fire")
	err := fmt.Errorf("append: %w", DiskFull.Wrap(cause, "broker disk is full"))
	if !Has(err, DiskFull) || Has(err, NotFound) {
		t.Fatal("Has does not see through wrapping")
	}
	if !errors.Is(err, cause) {
		t.Fatal("the cause is lost")
	}
	ce := Of(err)
	if ce.Entry != DiskFull || ce.Message != "broker disk is full" {
		t.Fatalf("Of = %+v", ce)
	}
	if got := Of(cause); got.Entry != Internal || got.Message != Internal.Description {
		t.Fatalf("Of(plain error) = %+v", got)
	}
	if NotFound.New("").Message != NotFound.Description {
		t.Fatal("empty message does not default to the description")
	}
}

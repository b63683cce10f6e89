package catalog

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
)

// ReadJSON reads a request body (the caller caps it, e.g. with
// http.MaxBytesReader at limit bytes) and decodes it strictly into v:
// exactly one JSON value, no unknown fields. Every failure is a catalogue
// client error saying what is wrong. It returns the body's bytes, for
// callers that forward requests as they are.
func ReadJSON(body io.Reader, v any, limit int64) ([]byte, error) {
	raw, err := io.ReadAll(body)
	if err != nil {
		return nil, jsonError(err, limit)
	}
	return raw, DecodeJSON(raw, v, limit)
}

// DecodeJSON is ReadJSON's decoding step over bytes already read.
func DecodeJSON(raw []byte, v any, limit int64) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err, limit)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return MalformedJSON.New("the body must hold exactly one JSON object")
	}
	return nil
}

func jsonError(err error, limit int64) error {
	var maxErr *http.MaxBytesError
	var syntax *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	var b64 base64.CorruptInputError
	switch {
	case errors.As(err, &maxErr):
		return BodyTooLarge.Newf("the body is larger than %d bytes", limit)
	case errors.Is(err, io.EOF):
		return MalformedJSON.New("the body is empty; send a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return MalformedJSON.New("the body ends in the middle of a JSON value")
	case errors.As(err, &syntax):
		return MalformedJSON.Newf("invalid JSON at byte %d", syntax.Offset)
	case errors.As(err, &typeErr):
		if typeErr.Field == "" {
			return InvalidRequest.Newf("the body must be a JSON object, not %s", typeErr.Value)
		}
		return InvalidRequest.Newf("field %q must be %s, not %s", typeErr.Field, jsonType(typeErr.Type.String()), typeErr.Value)
	case errors.As(err, &b64):
		return InvalidRequest.Newf("a key, value or header value is not valid base64 (standard alphabet, padded): bad byte at %d", int64(b64))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		// encoding/json has no typed error for this case.
		return UnknownField.Newf("unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
	}
	return MalformedJSON.Wrap(err, "")
}

// jsonType names a Go type as the JSON a caller should send.
func jsonType(goType string) string {
	switch {
	case goType == "string":
		return "a string"
	case goType == "[]uint8":
		return "a base64 string"
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "*int"), strings.HasPrefix(goType, "uint"):
		return "an integer"
	case strings.HasPrefix(goType, "float"):
		return "a number"
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	case goType == "bool":
		return "a boolean"
	case strings.HasPrefix(goType, "map["):
		return "an object"
	case goType == "time.Time":
		return "an RFC 3339 time string"
	}
	return "an object"
}

package records

// Header is one record header. A nil Value is a null header value.
type Header struct {
	Key   string
	Value []byte
}

// Record is one Kafka record. A nil Key or Value is null.
type Record struct {
	Offset    int64 // set by Decode; ignored by Build
	Timestamp int64 // milliseconds since the Unix epoch
	Key       []byte
	Value     []byte
	Headers   []Header
}

// HeaderValue returns the value of the first header named key.
func (r *Record) HeaderValue(key string) ([]byte, bool) {
	for _, h := range r.Headers {
		if h.Key == key {
			return h.Value, true
		}
	}
	return nil, false
}

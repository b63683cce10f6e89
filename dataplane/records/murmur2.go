package records

// Murmur2 is the hash of Kafka's default partitioner (the Java client's
// Utils.murmur2, also franz-go's and librdkafka's murmur2 partitioner).
func Murmur2(b []byte) int32 {
	const (
		seed uint32 = 0x9747b28c
		m    uint32 = 0x5bd1e995
		r           = 24
	)
	n := len(b)
	h := seed ^ uint32(n)
	for ; len(b) >= 4; b = b[4:] {
		k := uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	switch len(b) {
	case 3:
		h ^= uint32(b[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(b[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(b[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32(h)
}

// KeyPartition is the partition Kafka's default partitioner gives a
// non-null key among n partitions: the positive murmur2 hash modulo n.
func KeyPartition(key []byte, n int) int32 {
	return int32((Murmur2(key) & 0x7fffffff) % int32(n))
}

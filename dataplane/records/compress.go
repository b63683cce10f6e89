package records

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// ErrTooLarge means a batch would decompress beyond the bound.
var ErrTooLarge = errors.New("record batch decompresses beyond the limit")

// Compression codecs of the batch attributes.
const (
	codecNone   = 0
	codecGzip   = 1
	codecSnappy = 2
	codecLZ4    = 3
	codecZstd   = 4
)

// xerialMagic starts snappy data framed by the Java client's
// SnappyOutputStream: the magic, a version and a compatible version (4
// bytes each), then blocks of a 4-byte big-endian length and raw snappy.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// decompress returns body decompressed by codec, at most max bytes.
func decompress(body []byte, codec, max int) ([]byte, error) {
	switch codec {
	case codecNone:
		return body, nil
	case codecGzip:
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return nil, fmt.Errorf("%w: gzip: %w", ErrCorrupt, err)
		}
		return readBounded(zr, max, "gzip")
	case codecSnappy:
		if len(body) >= 16 && bytes.HasPrefix(body, xerialMagic) {
			return xerial(body[16:], max)
		}
		return snappyBlock(nil, body, max)
	case codecLZ4:
		return readBounded(lz4.NewReader(bytes.NewReader(body)), max, "lz4")
	case codecZstd:
		zr, err := zstd.NewReader(bytes.NewReader(body), zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxMemory(uint64(max)+1), zstd.WithDecoderMaxWindow(uint64(max)+1))
		if err != nil {
			return nil, fmt.Errorf("%w: zstd: %w", ErrCorrupt, err)
		}
		defer zr.Close()
		return readBounded(zr, max, "zstd")
	}
	return nil, fmt.Errorf("%w: unknown compression codec %d", ErrCorrupt, codec)
}

func readBounded(r io.Reader, max int, codec string) ([]byte, error) {
	var out bytes.Buffer
	n, err := out.ReadFrom(io.LimitReader(r, int64(max)+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCorrupt, codec, err)
	}
	if n > int64(max) {
		return nil, fmt.Errorf("%w: %s data beyond %d bytes", ErrTooLarge, codec, max)
	}
	return out.Bytes(), nil
}

func snappyBlock(dst, src []byte, max int) ([]byte, error) {
	n, err := s2.DecodedLen(src)
	if err != nil {
		return nil, fmt.Errorf("%w: snappy: %w", ErrCorrupt, err)
	}
	if n > max-len(dst) {
		return nil, fmt.Errorf("%w: snappy data of %d bytes", ErrTooLarge, n)
	}
	out, err := s2.Decode(nil, src)
	if err != nil {
		return nil, fmt.Errorf("%w: snappy: %w", ErrCorrupt, err)
	}
	return append(dst, out...), nil
}

func xerial(b []byte, max int) ([]byte, error) {
	var out []byte
	for len(b) > 0 {
		if len(b) < 4 {
			return nil, fmt.Errorf("%w: snappy: truncated xerial block length", ErrCorrupt)
		}
		n := binary.BigEndian.Uint32(b)
		b = b[4:]
		if uint64(n) > uint64(len(b)) {
			return nil, fmt.Errorf("%w: snappy: xerial block of %d bytes, %d left", ErrCorrupt, n, len(b))
		}
		var err error
		if out, err = snappyBlock(out, b[:n], max); err != nil {
			return nil, err
		}
		b = b[n:]
	}
	return out, nil
}

package log

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// Slice is a range of whole batches in one segment file, returned by Read.
// It holds the file open until Release, so retention deleting the segment
// does not break it. A Slice must be released exactly once; do not copy it
// and release both copies.
type Slice struct {
	seg        *segment
	Pos        int64 // byte position in File
	Size       int64 // bytes; 0 for an empty read
	BaseOffset int64 // base offset of the first batch
	NextOffset int64 // offset after the last batch
}

// File is the segment file, for a network layer that issues its own
// sendfile(2) or pread with explicit offsets. Never Read, Seek or io.Copy
// from it: its shared file offset is not owned by any one reader.
func (s *Slice) File() *os.File {
	if s.seg == nil {
		return nil
	}
	return s.seg.f
}

// ReadAt copies the slice's bytes from off (relative to Pos) into b, like
// io.ReaderAt over the range. It is the copy path for TLS connections.
func (s *Slice) ReadAt(b []byte, off int64) (int, error) {
	if off < 0 || off > s.Size {
		return 0, fmt.Errorf("read slice at %d: %w", off, ErrOffsetOutOfRange)
	}
	if s.seg == nil || off == s.Size {
		return 0, io.EOF
	}
	n := min(int64(len(b)), s.Size-off)
	m, err := s.seg.f.ReadAt(b[:n], s.Pos+off)
	if err == nil && int64(m) < int64(len(b)) {
		err = io.EOF
	}
	return m, err
}

// AppendTo appends the slice's bytes to b.
func (s *Slice) AppendTo(b []byte) ([]byte, error) {
	n := len(b)
	b = append(b, make([]byte, s.Size)...)
	m, err := s.ReadAt(b[n:], 0)
	if err == io.EOF && int64(m) == s.Size {
		err = nil
	}
	if err != nil {
		return b[:n], err
	}
	return b, nil
}

// WriteTo writes the slice to w. If w is a socket or file with a raw file
// descriptor (a *net.TCPConn, *net.UnixConn, *os.File), the kernel copies the
// bytes with sendfile(2) at explicit offsets, so concurrent readers of one
// segment do not race on the file offset. Anything else, such as a
// *tls.Conn, gets pread and Write through a pooled buffer.
func (s *Slice) WriteTo(w io.Writer) (int64, error) {
	if s.seg == nil || s.Size == 0 {
		return 0, nil
	}
	if sc, ok := w.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			n, err, handled := s.sendfile(rc)
			if handled {
				return n, err
			}
		}
	}
	return s.seg.copyRange(w, s.Pos, s.Size)
}

var errNoSendfile = errors.New("sendfile unsupported")

func (s *Slice) sendfile(rc syscall.RawConn) (n int64, err error, handled bool) {
	off, end := s.Pos, s.Pos+s.Size
	var serr error
	werr := rc.Write(func(fd uintptr) bool {
		for off < end {
			m, e := unix.Sendfile(int(fd), s.seg.fd, &off, int(min(end-off, 1<<30)))
			if m > 0 {
				n += int64(m)
			}
			switch {
			case e == unix.EAGAIN:
				return false // wait until the socket is writable
			case e == unix.EINTR:
				continue
			case e == unix.EINVAL || e == unix.ENOSYS:
				if n == 0 {
					serr = errNoSendfile
					return true
				}
				serr = e
				return true
			case e != nil:
				serr = e
				return true
			case m == 0:
				serr = io.ErrUnexpectedEOF
				return true
			}
		}
		return true
	})
	if serr == errNoSendfile {
		return 0, nil, false
	}
	if werr != nil {
		return n, werr, true
	}
	return n, serr, true
}

// Release drops the slice's hold on its segment file. It is safe to call on
// an empty Slice and more than once on the same variable.
func (s *Slice) Release() {
	if s.seg != nil {
		s.seg.unref()
		s.seg = nil
	}
}

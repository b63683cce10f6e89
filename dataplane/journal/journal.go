package journal

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
)

// DefaultFileBytes is the size of each of the two journal files.
const DefaultFileBytes = 64 << 20

var (
	// ErrTooLarge is returned by Append for a round larger than a journal
	// file can take; the caller syncs those files itself.
	ErrTooLarge = errors.New("journal: round larger than a journal file")
	// ErrClosed is returned by calls after Close.
	ErrClosed = errors.New("journal: closed")
)

// Owner is what wrote records: a partition log. SyncForJournal makes
// every byte it handed the journal durable in its own files, or, for an
// owner that was closed since (its Close synced and fenced), nothing.
type Owner interface {
	SyncForJournal() error
}

// Write is bytes at an offset of a file, the path relative to the data
// directory.
type Write struct {
	Path string
	Off  int64
	Data []byte
}

// Entry is one owner's writes in a round. Valid, asked under the journal's
// lock just before the records are written, drops the entry when it
// returns false: the owner was fenced after it read the bytes, and the
// fence's sync made them durable.
type Entry struct {
	Owner  Owner
	Valid  func() bool
	Writes []Write
}

// Stats counts what the journal did since Open.
type Stats struct {
	Rounds      int64 // Append calls that wrote and synced
	Bytes       int64 // bytes of records written
	Fences      int64
	Checkpoints int64 // journal files handed to their owners to sync
}

// Journal is an open write-ahead journal. It is safe for concurrent use.
// It owns one goroutine per checkpoint in progress; Close waits for them.
type Journal struct {
	root    string
	size    int64 // of each file
	reserve int64 // kept for fences at the end of each file

	// mu guards the fields below; Append and Fence write and sync under it.
	mu     sync.Mutex
	cond   *sync.Cond // signalled when a checkpoint ends
	files  [2]*os.File
	busy   [2]bool // a checkpoint of this file is in progress
	live   [2]map[Owner]struct{}
	cur    int
	pos    int64
	gen    uint64
	failed error
	closed bool
	stats  Stats

	wg sync.WaitGroup
}

// Options configure Open.
type Options struct {
	// FileBytes is the size of each journal file; DefaultFileBytes if 0.
	FileBytes int64
}

// Open replays the journal under root (the broker's data directory: the
// files are root/journal/0 and root/journal/1) into the files it names,
// then starts a new generation. Call it before any log under root opens.
func Open(root string, o Options) (*Journal, Report, error) {
	size := o.FileBytes
	if size == 0 {
		size = DefaultFileBytes
	}
	if size < 64<<10 {
		return nil, Report{}, fmt.Errorf("open journal: file size %d is below 64 KiB", size)
	}
	dir := filepath.Join(root, "journal")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, Report{}, fmt.Errorf("open journal: %w", err)
	}
	var contents [][]byte
	var gen uint64
	for i := range 2 {
		b, err := os.ReadFile(filePath(dir, i))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, Report{}, fmt.Errorf("open journal: %w", err)
		}
		gen = max(gen, decodeHeader(b))
		contents = append(contents, b)
	}
	rep, err := replay(root, contents)
	if err != nil {
		return nil, rep, fmt.Errorf("open journal: %w", err)
	}
	j := &Journal{root: root, size: size, reserve: min(1<<20, size/16), gen: gen + 1, pos: headerSize}
	j.cond = sync.NewCond(&j.mu)
	for i := range 2 {
		j.live[i] = map[Owner]struct{}{}
		f, err := openFile(filePath(dir, i), size)
		if err != nil {
			j.closeFiles()
			return nil, rep, fmt.Errorf("open journal: %w", err)
		}
		j.files[i] = f
	}
	// File 0 starts the new generation; file 1 holds nothing until the
	// first switch. Both headers are durable before any record is written.
	if err := j.writeHeader(0, j.gen); err == nil {
		err = j.writeHeader(1, 0)
	} else {
		j.closeFiles()
		return nil, rep, fmt.Errorf("open journal: %w", err)
	}
	if err := syncDir(dir); err != nil {
		j.closeFiles()
		return nil, rep, fmt.Errorf("open journal: %w", err)
	}
	return j, rep, nil
}

func filePath(dir string, i int) string { return filepath.Join(dir, fmt.Sprint(i)) }

// openFile opens a journal file of exactly size bytes, allocated where it
// is new, so that a round's fdatasync never has to commit a new file size.
func openFile(path string, size int64) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err == nil && st.Size() != size {
		err = allocate(f, size)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("prepare %s: %w", path, err)
	}
	return f, nil
}

// allocate gives f exactly size bytes on disk. fallocate(2) takes no
// time; the first write to each of its blocks then also commits the
// block's conversion, so a file's first pass is somewhat slower than its
// later ones (BenchmarkSyncRound through a new journal: 100 logs at
// 102-103 MB/s against 126-130 with the file written with zeros first).
// Where fallocate is not supported the file is written with zeros.
func allocate(f *os.File, size int64) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	err := unix.Fallocate(int(f.Fd()), 0, 0, size)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
		return zeroFill(f, size)
	}
	if err != nil {
		return err
	}
	return f.Sync()
}

func zeroFill(f *os.File, size int64) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	z := make([]byte, 1<<20)
	for off := int64(0); off < size; off += int64(len(z)) {
		n := min(int64(len(z)), size-off)
		if _, err := f.WriteAt(z[:n], off); err != nil {
			return err
		}
	}
	return f.Sync()
}

func (j *Journal) writeHeader(i int, gen uint64) error {
	if _, err := j.files[i].WriteAt(encodeHeader(gen), 0); err != nil {
		return fmt.Errorf("write journal header: %w", err)
	}
	if err := fdatasync(j.files[i]); err != nil {
		return fmt.Errorf("sync journal header: %w", err)
	}
	return nil
}

// Root is the directory the records' paths are relative to.
func (j *Journal) Root() string { return j.root }

// Stats reports what the journal did since Open.
func (j *Journal) Stats() Stats {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.stats
}

// Append writes the records of every valid entry and makes them durable
// with one fdatasync. It reports which entries it wrote; an entry not
// written was dropped by its Valid. On ErrTooLarge nothing is written.
func (j *Journal) Append(entries []Entry) ([]bool, error) {
	bound := 0
	for _, e := range entries {
		for _, w := range e.Writes {
			if err := checkPath(w.Path); err != nil {
				return nil, fmt.Errorf("journal append: %w", err)
			}
			bound += recordSize(record{kind: kindWrite, path: w.Path, data: w.Data})
		}
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.usable(); err != nil {
		return nil, err
	}
	if int64(bound) > j.size-headerSize-j.reserve {
		return nil, ErrTooLarge
	}
	if j.pos+int64(bound) > j.size-j.reserve {
		if err := j.switchFile(); err != nil {
			return nil, err
		}
	}
	// Valid is asked only now: a fence that came while switchFile waited
	// is already written, so a dropped entry is one the fence covers and a
	// kept one's records come before any later fence.
	// The heads go into one buffer, sized up front so the slices into it
	// stay valid; each write's bytes are written from where they are.
	wrote := make([]bool, len(entries))
	heads := make([]byte, 0, bound)
	var iov [][]byte
	size := 0
	for i, e := range entries {
		if e.Valid != nil && !e.Valid() {
			continue
		}
		wrote[i] = true
		for _, w := range e.Writes {
			start := len(heads)
			heads = appendHead(heads, j.gen, record{kind: kindWrite, path: w.Path, off: w.Off, data: w.Data})
			iov = append(iov, heads[start:len(heads):len(heads)], w.Data)
			size += len(heads) - start + len(w.Data)
		}
	}
	if size == 0 {
		return wrote, nil
	}
	if err := j.write(iov, size); err != nil {
		return nil, err
	}
	for i, e := range entries {
		if wrote[i] {
			j.live[j.cur][e.Owner] = struct{}{}
		}
	}
	j.stats.Rounds++
	j.stats.Bytes += int64(size)
	return wrote, nil
}

// Fence makes sure no record written so far for a file directly in dir is
// replayed. The caller has made every such byte durable in its own file
// and holds off further writes to dir until it has done what needed the
// fence (removing, truncating or replacing files).
func (j *Journal) Fence(dir string) error {
	if err := checkPath(dir); err != nil {
		return fmt.Errorf("journal fence: %w", err)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.usable(); err != nil {
		return err
	}
	n := int64(recordSize(record{kind: kindFence, path: dir}))
	if j.pos+n > j.size-j.reserve && !j.busy[1-j.cur] {
		// Fences alone have filled the file: move on while the other is
		// free, which never waits.
		if err := j.switchFile(); err != nil {
			return err
		}
	}
	buf := appendRecord(nil, j.gen, record{kind: kindFence, path: dir})
	if j.pos+int64(len(buf)) > j.size {
		// The reserve is gone: a checkpoint has been slow for thousands of fences.
		return fmt.Errorf("journal fence %s: %w", dir, ErrTooLarge)
	}
	if err := j.write([][]byte{buf}, len(buf)); err != nil {
		return err
	}
	j.stats.Fences++
	return nil
}

// Forget drops o from the owners a checkpoint syncs: it closed after
// syncing and fencing everything it wrote.
func (j *Journal) Forget(o Owner) {
	j.mu.Lock()
	defer j.mu.Unlock()
	delete(j.live[0], o)
	delete(j.live[1], o)
}

// write writes iov, size bytes in all, at the current position and syncs
// it. Called with mu held.
func (j *Journal) write(iov [][]byte, size int) error {
	f := j.files[j.cur]
	if err := PwritevAll(int(f.Fd()), iov, j.pos); err != nil {
		j.failed = fmt.Errorf("journal write: %w", err)
		return j.failed
	}
	if err := fdatasync(f); err != nil {
		j.failed = fmt.Errorf("journal sync: %w", err)
		return j.failed
	}
	j.pos += int64(size)
	return nil
}

// maxIOV is how many buffers one pwritev takes (Linux's IOV_MAX).
const maxIOV = 1024

// PwritevAll writes every byte of iov at off, over as many pwritev calls
// as short writes and IOV_MAX take. It may reslice iov's elements. The
// journal writes its rounds with it, and dataplane/log its appends.
func PwritevAll(fd int, iov [][]byte, off int64) error {
	for len(iov) > 0 {
		n, err := unix.Pwritev(fd, iov[:min(len(iov), maxIOV)], off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return io.ErrShortWrite
		}
		off += int64(n)
		for n > 0 {
			if n >= len(iov[0]) {
				n -= len(iov[0])
				iov = iov[1:]
			} else {
				iov[0] = iov[0][n:]
				n = 0
			}
		}
		for len(iov) > 0 && len(iov[0]) == 0 {
			iov = iov[1:]
		}
	}
	return nil
}

// switchFile makes the other file current under a new generation, once
// its last checkpoint is done, and starts the checkpoint of the one left.
// Called with mu held; it may wait.
func (j *Journal) switchFile() error {
	other := 1 - j.cur
	for j.busy[other] && j.failed == nil && !j.closed {
		j.cond.Wait()
	}
	if err := j.usable(); err != nil {
		return err
	}
	if err := j.writeHeader(other, j.gen+1); err != nil {
		j.failed = err
		return err
	}
	j.gen++
	old := j.cur
	j.cur, j.pos = other, headerSize
	owners := j.live[old]
	j.live[old] = map[Owner]struct{}{}
	j.busy[old] = true
	j.stats.Checkpoints++
	j.wg.Add(1)
	go j.checkpoint(old, owners)
	return nil
}

// checkpoint has every owner of file i sync its own files, then frees i.
func (j *Journal) checkpoint(i int, owners map[Owner]struct{}) {
	defer j.wg.Done()
	var err error
	for o := range owners {
		if err = o.SyncForJournal(); err != nil {
			break
		}
	}
	j.mu.Lock()
	if err != nil && j.failed == nil {
		j.failed = fmt.Errorf("journal checkpoint: %w", err)
	}
	j.busy[i] = false
	j.cond.Broadcast()
	j.mu.Unlock()
}

func (j *Journal) usable() error {
	if j.closed {
		return ErrClosed
	}
	return j.failed
}

// Close waits for checkpoints in progress and closes the files. Records
// already written stay for the next Open to replay. Close is idempotent.
func (j *Journal) Close() error {
	j.mu.Lock()
	j.closed = true
	j.cond.Broadcast()
	j.mu.Unlock()
	j.wg.Wait()
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.closeFiles()
}

func (j *Journal) closeFiles() error {
	var err error
	for i, f := range j.files {
		if f != nil {
			err = errors.Join(err, f.Close())
			j.files[i] = nil
		}
	}
	return err
}

func fdatasync(f *os.File) error {
	for {
		err := unix.Fdatasync(int(f.Fd()))
		if err != unix.EINTR {
			return err
		}
	}
}

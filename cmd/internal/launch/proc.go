package launch

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/contract/testkit"
)

// Proc is one server process started by Start and owned by the caller.
type Proc struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{} // closed when the process has exited
	err     error         // its exit status, once done is closed
}

// Start starts bin with args and env added to this process's environment,
// its stdout and stderr appended to logPath between a start and an exit
// line. The process gets its own process group, so a signal to the caller
// (a terminal's Ctrl-C) does not also reach it and a SIGSTOP reaches only
// it, and it is killed if the caller dies without stopping it.
func Start(name, logPath string, env []string, bin string, args ...string) (*Proc, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open log of %s: %w", name, err)
	}
	fmt.Fprintf(f, "---- %s start %s\n", time.Now().UTC().Format(time.RFC3339Nano), name)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Proc{name: name, logPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		fmt.Fprintf(f, "---- %s exit %s: %v\n", time.Now().UTC().Format(time.RFC3339Nano), name, p.err)
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// Pid is the process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Running reports whether the process has not exited yet.
func (p *Proc) Running() bool { return p.Exited() == nil }

// Exited returns an error saying how the process ended, nil while it runs.
func (p *Proc) Exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited (%v); see %s", p.name, p.err, p.logPath)
	default:
		return nil
	}
}

// WaitOK waits, as WaitFor does, until url answers 200 OK; once the
// process has exited, its exit is the error each poll reports.
func (p *Proc) WaitOK(ctx context.Context, what, url string, limit time.Duration) error {
	return WaitFor(ctx, what, limit, func() error {
		if err := p.Exited(); err != nil {
			return err
		}
		resp, err := http.Get(url)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("get %s: %s", url, resp.Status)
		}
		return nil
	})
}

// Signal sends sig to the process if it still runs.
func (p *Proc) Signal(sig syscall.Signal) {
	if p.Running() {
		_ = p.cmd.Process.Signal(sig)
	}
}

// Wait waits up to limit for the process to exit and reports whether it
// did.
func (p *Proc) Wait(limit time.Duration) bool {
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-p.done:
		return true
	case <-t.C:
		return false
	}
}

// Kill sends SIGKILL and waits for the exit.
func (p *Proc) Kill() {
	p.Signal(syscall.SIGKILL)
	<-p.done
}

// Stop sends SIGTERM (and SIGCONT, in case the process is stopped), waits
// up to grace for the exit, then kills it. It reports whether the process
// exited within grace. A nil Proc is stopped already.
func (p *Proc) Stop(grace time.Duration) bool {
	if p == nil {
		return true
	}
	p.Signal(syscall.SIGTERM)
	p.Signal(syscall.SIGCONT)
	if p.Wait(grace) {
		return true
	}
	p.Kill()
	return false
}

// FreeAddr returns an address on host whose port was free a moment ago
// (testkit.FreeAddr), for a server that needs its port in advance.
func FreeAddr(host string) (string, error) { return testkit.FreeAddr(host) }

// FreeAddrs returns n distinct such addresses on host.
func FreeAddrs(host string, n int) ([]string, error) {
	addrs := make([]string, n)
	for i := range addrs {
		a, err := testkit.FreeAddr(host)
		if err != nil {
			return nil, err
		}
		addrs[i] = a
	}
	return addrs, nil
}

// WaitFor polls cond every 100 ms until it returns nil, ctx ends or limit
// passes; the error names what was awaited and cond's last error.
func WaitFor(ctx context.Context, what string, limit time.Duration, cond func() error) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		err := cond()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: not within %v: %w", what, limit, errors.Join(err, ctx.Err()))
		case <-tick.C:
		}
	}
}

// Repeat calls f over and over in a goroutine of its own until f returns
// false or stop is called. stop waits for the call under way to return;
// calling it again does nothing.
func Repeat(f func() bool) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			default:
			}
			if !f() {
				return
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(quit) })
		<-done
	}
}

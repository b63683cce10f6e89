package deploytest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/sluicehq/sluice/contract/testkit"
)

// pods runs a rendered chart's containers as local processes, the way a
// kubelet would run them, with only what a machine needs changed: every
// 0.0.0.0:PORT a pod listens on and every *.svc.cluster.local:PORT name
// becomes a loopback address of its own (the same one for a pod's listen
// and advertised address), and every mount path becomes a directory. The
// arguments, environment variables (with $(VAR) references expanded and
// valueFrom resolved) and config files are the chart's, so the chart
// cannot drift from what the binary accepts.
type pods struct {
	t   *testing.T
	bin string
	dir string
	// configMaps and secrets are what volumes and valueFrom resolve to.
	configMaps map[string]map[string]string
	secrets    map[string]map[string]string
	// secretDirs are secret volumes given as directories of files.
	secretDirs map[string]string

	mu    sync.Mutex
	addrs map[string]string // "owner:port" -> 127.0.0.1:N
	data  map[string]string // a pod's persistent volume, kept across restarts
	procs []*proc
}

func newPods(t *testing.T, bin string, r rendered) *pods {
	p := &pods{t: t, bin: bin, dir: t.TempDir(), configMaps: map[string]map[string]string{}, secrets: map[string]map[string]string{},
		secretDirs: map[string]string{}, addrs: map[string]string{}, data: map[string]string{}}
	for _, cm := range r.ConfigMaps {
		p.configMaps[cm.Name] = cm.Data
	}
	t.Cleanup(p.stopAll)
	return p
}

// addr is the loopback address standing for owner's port (a pod name, or
// a Service's name for what its DNS name reaches).
func (p *pods) addr(owner, port string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := owner + ":" + port
	if a, ok := p.addrs[k]; ok {
		return a
	}
	a, err := testkit.FreeAddr("127.0.0.1") // below the ephemeral range
	if err != nil {
		p.t.Fatal(err)
	}
	p.addrs[k] = a
	return a
}

var (
	anyAddrRE  = regexp.MustCompile(`0\.0\.0\.0:(\d+)`)
	clusterRE  = regexp.MustCompile(`([a-z0-9-]+)(?:\.[a-z0-9$()_-]+)*\.svc\.cluster\.local:(\d+)`)
	envRefRE   = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	sluiceEnvs = regexp.MustCompile(`SLUICE_[A-Z_]+[A-Z]`)
)

// subst rewrites a value of owner's: its listen and cluster addresses to
// loopback ones, its mount paths to their directories.
func (p *pods) subst(owner, s string, mounts map[string]string) string {
	s = anyAddrRE.ReplaceAllStringFunc(s, func(m string) string { return p.addr(owner, anyAddrRE.FindStringSubmatch(m)[1]) })
	s = clusterRE.ReplaceAllStringFunc(s, func(m string) string {
		sub := clusterRE.FindStringSubmatch(m)
		return p.addr(sub[1], sub[2])
	})
	paths := make([]string, 0, len(mounts))
	for m := range mounts {
		paths = append(paths, m)
	}
	sort.Slice(paths, func(i, j int) bool { return len(paths[i]) > len(paths[j]) })
	for _, m := range paths {
		s = strings.ReplaceAll(s, m, mounts[m])
	}
	return s
}

// proc is one running container.
type proc struct {
	name string
	log  string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// start runs spec's first container as pod name (owner of its addresses),
// with fields answering its fieldRefs and extra environment appended.
func (p *pods) start(name string, spec corev1.PodSpec, fields map[string]string, extra ...string) *proc {
	p.t.Helper()
	c := spec.Containers[0]
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = p.volume(name, spec, m.Name)
	}
	// Config files are written per pod: their addresses are the pod's.
	for _, m := range c.VolumeMounts {
		for _, v := range spec.Volumes {
			if v.Name == m.Name && v.ConfigMap != nil {
				dir := filepath.Join(p.dir, name, "cm-"+v.Name)
				if err := os.MkdirAll(dir, 0o700); err != nil {
					p.t.Fatal(err)
				}
				for k, val := range p.configMaps[v.ConfigMap.Name] {
					if err := os.WriteFile(filepath.Join(dir, k), []byte(p.subst(name, val, mounts)), 0o600); err != nil {
						p.t.Fatal(err)
					}
				}
				mounts[m.MountPath] = dir
			}
		}
	}
	env := map[string]string{}
	list := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + p.dir}
	for _, e := range c.Env {
		v := e.Value
		switch {
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil:
			var ok bool
			if v, ok = fields[e.ValueFrom.FieldRef.FieldPath]; !ok {
				p.t.Fatalf("%s: env %s: no value for field %s", name, e.Name, e.ValueFrom.FieldRef.FieldPath)
			}
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			var ok bool
			if v, ok = p.secrets[ref.Name][ref.Key]; !ok {
				p.t.Fatalf("%s: env %s: no secret %s key %s", name, e.Name, ref.Name, ref.Key)
			}
		case e.ValueFrom != nil:
			p.t.Fatalf("%s: env %s: unsupported valueFrom %+v", name, e.Name, e.ValueFrom)
		default:
			v = envRefRE.ReplaceAllStringFunc(v, func(m string) string {
				if val, ok := env[envRefRE.FindStringSubmatch(m)[1]]; ok {
					return val
				}
				return m
			})
		}
		env[e.Name] = v
		list = append(list, e.Name+"="+p.subst(name, v, mounts))
	}
	list = append(list, extra...)
	args := append(append([]string{}, c.Command...), c.Args...)
	if len(c.Command) > 0 {
		p.t.Fatalf("%s: the chart sets a command %v; the image's entrypoint is tenantd", name, c.Command)
	}
	logPath := filepath.Join(p.dir, name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		p.t.Fatal(err)
	}
	cmd := exec.Command(p.bin, args...)
	cmd.Env, cmd.Stdout, cmd.Stderr = list, f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		p.t.Fatalf("start %s: %v", name, err)
	}
	pr := &proc{name: name, log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		pr.err = cmd.Wait()
		f.Close()
		close(pr.done)
	}()
	p.mu.Lock()
	p.procs = append(p.procs, pr)
	p.mu.Unlock()
	return pr
}

// volume is the directory standing for a pod's volume.
func (p *pods) volume(pod string, spec corev1.PodSpec, name string) string {
	for _, v := range spec.Volumes {
		if v.Name != name {
			continue
		}
		switch {
		case v.Secret != nil:
			dir, ok := p.secretDirs[v.Secret.SecretName]
			if !ok {
				p.t.Fatalf("%s: volume %s: no secret %s", pod, name, v.Secret.SecretName)
			}
			return dir
		case v.ConfigMap != nil:
			return "" // written by start
		}
		p.t.Fatalf("%s: volume %s: unsupported %+v", pod, name, v.VolumeSource)
	}
	// Not in the pod spec: a volume claim template's, kept per pod.
	p.mu.Lock()
	defer p.mu.Unlock()
	k := pod + "/" + name
	if d, ok := p.data[k]; ok {
		return d
	}
	d := filepath.Join(p.dir, pod, "pvc-"+name)
	if err := os.MkdirAll(d, 0o700); err != nil {
		p.t.Fatal(err)
	}
	p.data[k] = d
	return d
}

// wait waits for the process to exit and returns how it ended.
func (pr *proc) wait(limit time.Duration) error {
	select {
	case <-pr.done:
		return pr.err
	case <-time.After(limit):
		return fmt.Errorf("%s still runs after %v", pr.name, limit)
	}
}

func (pr *proc) kill() {
	_ = syscall.Kill(-pr.cmd.Process.Pid, syscall.SIGKILL)
	<-pr.done
}

func (pr *proc) tail(n int) string {
	b, _ := os.ReadFile(pr.log)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func (p *pods) stopAll() {
	p.mu.Lock()
	procs := p.procs
	p.mu.Unlock()
	for _, pr := range procs {
		select {
		case <-pr.done:
			continue
		default:
		}
		_ = syscall.Kill(-pr.cmd.Process.Pid, syscall.SIGTERM)
	}
	for _, pr := range procs {
		if pr.wait(20*time.Second) != nil {
			select {
			case <-pr.done:
			default:
				pr.kill()
			}
		}
		if p.t.Failed() {
			p.t.Logf("---- %s log (last lines):\n%s", pr.name, pr.tail(40))
		}
	}
}

// service is a stand-in for a Kubernetes Service on loopback: it accepts
// on addr and forwards each connection to the next backend that accepts
// one, round robin, skipping backends that are down.
func service(t *testing.T, addr string, backends []string) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); ln.Close(); wg.Wait() })
	next := 0
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			var out net.Conn
			for i := range backends {
				b := backends[(next+i)%len(backends)]
				if out, err = (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", b); err == nil {
					next = (next + i + 1) % len(backends)
					break
				}
			}
			if out == nil {
				in.Close()
				continue
			}
			wg.Add(2)
			go pipe(&wg, out, in)
			go pipe(&wg, in, out)
			context.AfterFunc(ctx, func() { in.Close(); out.Close() })
		}
	}()
}

func pipe(wg *sync.WaitGroup, dst, src net.Conn) {
	defer wg.Done()
	_, _ = io.Copy(dst, src)
	dst.Close()
	src.Close()
}

// buildTenantd builds the binary the chart's image runs.
func buildTenantd(t *testing.T) string { return testkit.BuildTenantd(t, t.TempDir()) }

// tenantd runs the binary to completion (an operator's command).
func tenantd(t *testing.T, bin string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) || err != nil {
			t.Fatalf("tenantd %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), stderr.String())
		}
	}
	return out.String()
}

package deploytest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// valueSets are the chart's values the tests render: the defaults and two
// others (testdata/*.yaml).
var valueSets = []struct{ name, file string }{
	{"defaults", ""},
	{"tls-two-cells", "testdata/tls-two-cells.yaml"},
	{"custom", "testdata/custom.yaml"},
}

func renderSet(t *testing.T, file string) rendered {
	if file == "" {
		return render(t)
	}
	return render(t, file)
}

// TestChartPolicy renders the chart for each value set and checks what a
// production deployment needs: a control plane of two or more replicas
// behind a Service with a PDB, running no billing worker; the billing
// worker as a Deployment of its own (tenantd billing) with probes,
// metrics and a PDB; the migration Job as a pre-install and
// pre-upgrade hook; each cell a StatefulSet of three brokers with volumes,
// a headless Service that publishes not-ready brokers, spread across zones
// and never two on a node, a PDB of maxUnavailable 1 selecting exactly its
// brokers, readiness on /readyz, liveness on /livez with a startup probe
// that allows a long recovery; resources on every container; secrets only
// from Secrets (none in a ConfigMap, none as a plain env value).
func TestChartPolicy(t *testing.T) {
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			r := renderSet(t, vs.file)
			checkControlPlane(t, r)
			checkBilling(t, r)
			checkJobs(t, r)
			checkCells(t, r, vs.file)
			checkSecrets(t, r, vs.file)
			checkStripe(t, r, vs.file)
			checkBrokerMetrics(t, r)
		})
	}
}

// deployment is the chart's Deployment of component (controlplane,
// billing), failing the test unless there is exactly one.
func deployment(t *testing.T, r rendered, component string) *appsv1.Deployment {
	t.Helper()
	var found []*appsv1.Deployment
	for _, d := range r.Deployments {
		if d.Spec.Template.Labels["app.kubernetes.io/component"] == component {
			found = append(found, d)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d Deployments of component %s, want 1", len(found), component)
	}
	return found[0]
}

func checkControlPlane(t *testing.T, r rendered) {
	if len(r.Deployments) != 2 {
		t.Fatalf("%d Deployments, want the control plane's and the billing worker's", len(r.Deployments))
	}
	d := deployment(t, r, "controlplane")
	if d.Spec.Replicas == nil || *d.Spec.Replicas < 2 {
		t.Errorf("control plane replicas %v, want at least 2", d.Spec.Replicas)
	}
	pod := d.Spec.Template
	checkContainers(t, "control plane", pod.Spec)
	c := pod.Spec.Containers[0]
	for name, p := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe, "startup": c.StartupProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" {
			t.Errorf("control plane %s probe %+v, want GET /healthz", name, p)
		}
	}
	if svc := serviceSelecting(r, pod.Labels, false); svc == nil {
		t.Errorf("no Service selects the control plane")
	}
	checkPDB(t, r, "control plane", pod.Labels)
}

func checkJobs(t *testing.T, r rendered) {
	if len(r.Jobs) != 1 {
		t.Fatalf("%d Jobs, want the migration Job", len(r.Jobs))
	}
	j := r.Jobs[0]
	if hook := j.Annotations["helm.sh/hook"]; hook != "pre-install,pre-upgrade" {
		t.Errorf("migration Job hook %q, want pre-install,pre-upgrade (once per install and upgrade, before the rollout)", hook)
	}
	if c := j.Spec.Template.Spec.Containers; len(c) != 1 || strings.Join(c[0].Args, " ") != "migrate" {
		t.Errorf("migration Job runs %+v, want tenantd migrate", c)
	}
	if j.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("migration Job restart policy %q", j.Spec.Template.Spec.RestartPolicy)
	}
	checkContainers(t, "migration Job", j.Spec.Template.Spec)
	for _, s := range r.Secrets {
		sw, err1 := strconv.Atoi(s.Annotations["helm.sh/hook-weight"])
		jw, err2 := strconv.Atoi(j.Annotations["helm.sh/hook-weight"])
		if s.Annotations["helm.sh/hook"] != j.Annotations["helm.sh/hook"] || err1 != nil || err2 != nil || sw >= jw {
			t.Errorf("Secret %s is not a hook made before the migration Job (annotations %v)", s.Name, s.Annotations)
		}
	}
}

func checkCells(t *testing.T, r rendered, file string) {
	if len(r.StatefulSets) == 0 {
		t.Fatal("no cell StatefulSet")
	}
	for _, s := range r.StatefulSets {
		name := "StatefulSet " + s.Name
		if s.Spec.Replicas == nil || *s.Spec.Replicas != 3 {
			t.Errorf("%s: replicas %v, want 3 (a cell)", name, s.Spec.Replicas)
		}
		pod := s.Spec.Template
		checkContainers(t, name, pod.Spec)
		if len(s.Spec.VolumeClaimTemplates) != 1 || s.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests.Storage().IsZero() {
			t.Errorf("%s: volume claim templates %+v, want one data volume with a size", name, s.Spec.VolumeClaimTemplates)
		}
		mounted := false
		for _, m := range pod.Spec.Containers[0].VolumeMounts {
			mounted = mounted || m.Name == s.Spec.VolumeClaimTemplates[0].Name
		}
		if !mounted {
			t.Errorf("%s: the data volume is not mounted", name)
		}
		headless := serviceSelecting(r, pod.Labels, true)
		if headless == nil || headless.Name != s.Spec.ServiceName {
			t.Errorf("%s: serviceName %q is not a headless Service selecting its brokers", name, s.Spec.ServiceName)
		} else if !headless.Spec.PublishNotReadyAddresses {
			t.Errorf("%s: headless Service %s does not publish not-ready brokers (Raft peers of a recovering broker need its address)", name, headless.Name)
		}
		if s.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
			t.Errorf("%s: podManagementPolicy %q, want Parallel (a broker is ready only with its peers)", name, s.Spec.PodManagementPolicy)
		}
		zone := false
		for _, c := range pod.Spec.TopologySpreadConstraints {
			if c.TopologyKey == "topology.kubernetes.io/zone" && c.MaxSkew == 1 && selects(c.LabelSelector.MatchLabels, pod.Labels) {
				zone = true
			}
		}
		if !zone {
			t.Errorf("%s: no zone topology spread of its brokers", name)
		}
		host := false
		if a := pod.Spec.Affinity; a != nil && a.PodAntiAffinity != nil {
			for _, term := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				host = host || term.TopologyKey == "kubernetes.io/hostname" && selects(term.LabelSelector.MatchLabels, pod.Labels)
			}
		}
		if !host {
			t.Errorf("%s: no required anti-affinity keeping two brokers off one node", name)
		}
		checkPDB(t, r, name, pod.Labels)
		c := pod.Spec.Containers[0]
		if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" {
			t.Errorf("%s: readiness probe %+v, want GET /readyz (serving its replicas)", name, p)
		}
		if p := c.LivenessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/livez" {
			t.Errorf("%s: liveness probe %+v, want GET /livez", name, p)
		}
		if p := c.StartupProbe; p == nil || p.HTTPGet == nil || int(p.PeriodSeconds)*int(p.FailureThreshold) < 1800 {
			t.Errorf("%s: startup probe %+v, want one allowing at least 30 minutes of recovery", name, p)
		}
		for _, p := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe, c.StartupProbe} {
			if p != nil && p.HTTPGet != nil && !hasPort(c, p.HTTPGet.Port.String()) {
				t.Errorf("%s: probe port %s is not a container port", name, p.HTTPGet.Port.String())
			}
		}
	}
	if file == "testdata/tls-two-cells.yaml" && len(r.StatefulSets) != 2 {
		t.Errorf("%d StatefulSets for two cells", len(r.StatefulSets))
	}
}

// checkStripe: stripe.existingSecret reaches the billing worker as
// SLUICE_STRIPE_KEY (the variable tenantd billing reads) from that
// Secret's key; without it the worker gets no Stripe key; the control
// plane, which runs no worker, never gets one.
func checkStripe(t *testing.T, r rendered, file string) {
	stripeEnv := func(d *appsv1.Deployment) *corev1.EnvVar {
		for _, e := range d.Spec.Template.Spec.Containers[0].Env {
			if strings.Contains(e.Name, "STRIPE") {
				return &e
			}
		}
		return nil
	}
	if got := stripeEnv(deployment(t, r, "controlplane")); got != nil {
		t.Errorf("control plane has %s: it runs no billing worker", got.Name)
	}
	got := stripeEnv(deployment(t, r, "billing"))
	if file != "testdata/custom.yaml" {
		if got != nil {
			t.Errorf("billing worker has %s without stripe.existingSecret", got.Name)
		}
		return
	}
	if got == nil || got.Name != "SLUICE_STRIPE_KEY" || got.ValueFrom == nil || got.ValueFrom.SecretKeyRef == nil ||
		got.ValueFrom.SecretKeyRef.Name != "sluice-stripe" || got.ValueFrom.SecretKeyRef.Key != "secret-key" {
		t.Errorf("billing worker Stripe key %+v, want SLUICE_STRIPE_KEY from Secret sluice-stripe key secret-key", got)
	}
}

// checkBilling: the billing worker is a Deployment running tenantd
// billing with its config file, the database URL from its Secret,
// readiness on /readyz and liveness on /livez on its health port, its
// metrics port annotated for scraping, both as its config file
// (billing.json) serves them, and a PDB; the control plane's config
// turns its own worker off.
func checkBilling(t *testing.T, r rendered) {
	d := deployment(t, r, "billing")
	pod := d.Spec.Template
	checkContainers(t, "billing worker", pod.Spec)
	c := pod.Spec.Containers[0]
	if strings.Join(c.Args, " ") != "billing" {
		t.Errorf("billing worker runs %v, want tenantd billing", c.Args)
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas < 1 {
		t.Errorf("billing worker replicas %v, want at least 1", d.Spec.Replicas)
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	if e, ok := env["SLUICE_DATABASE_URL"]; !ok || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
		t.Errorf("billing worker database URL %+v, want one from a Secret", e)
	}
	if env["SLUICE_CONFIG"].Value != "/etc/sluice/config/billing.json" {
		t.Errorf("billing worker config %q", env["SLUICE_CONFIG"].Value)
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" || p.HTTPGet.Port.String() != "health" {
		t.Errorf("billing worker readiness probe %+v, want GET /readyz on the health port", p)
	}
	if p := c.LivenessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/livez" || p.HTTPGet.Port.String() != "health" {
		t.Errorf("billing worker liveness probe %+v, want GET /livez on the health port", p)
	}
	var cfg, cpCfg string
	for _, cm := range r.ConfigMaps {
		if v, ok := cm.Data["billing.json"]; ok {
			cfg = v
		}
		if v, ok := cm.Data["controlplane.json"]; ok {
			cpCfg = v
		}
	}
	if ports["health"] == 0 || !strings.Contains(cfg, fmt.Sprintf(`"health_listen": "0.0.0.0:%d"`, ports["health"])) {
		t.Errorf("billing.json does not serve health on the health port %d:\n%s", ports["health"], cfg)
	}
	if ports["metrics"] == 0 || !strings.Contains(cfg, fmt.Sprintf(`"metrics_listen": "0.0.0.0:%d"`, ports["metrics"])) {
		t.Errorf("billing.json does not serve metrics on the metrics port %d:\n%s", ports["metrics"], cfg)
	}
	if a := pod.Annotations; a["prometheus.io/scrape"] != "true" || a["prometheus.io/port"] != strconv.Itoa(int(ports["metrics"])) {
		t.Errorf("billing worker scrape annotations %v", a)
	}
	if !strings.Contains(cpCfg, `"billing_worker": false`) {
		t.Errorf("controlplane.json leaves the control plane's billing worker on beside the billing Deployment:\n%s", cpCfg)
	}
	checkPDB(t, r, "billing worker", pod.Labels)
}

// checkBrokerMetrics: every broker serves its metrics (metrics_listen in
// broker.json) on its container's metrics port, the pod carries the
// prometheus.io scrape annotations for that port, and the cell's headless
// Service exposes it.
func checkBrokerMetrics(t *testing.T, r rendered) {
	var cfg string
	for _, cm := range r.ConfigMaps {
		if v, ok := cm.Data["broker.json"]; ok {
			cfg = v
		}
	}
	for _, s := range r.StatefulSets {
		name := "StatefulSet " + s.Name
		pod := s.Spec.Template
		var port int32
		for _, p := range pod.Spec.Containers[0].Ports {
			if p.Name == "metrics" {
				port = p.ContainerPort
			}
		}
		if port == 0 {
			t.Errorf("%s: no metrics container port", name)
			continue
		}
		if !strings.Contains(cfg, fmt.Sprintf(`"metrics_listen": "0.0.0.0:%d"`, port)) {
			t.Errorf("%s: broker.json does not serve metrics on %d:\n%s", name, port, cfg)
		}
		a := pod.Annotations
		if a["prometheus.io/scrape"] != "true" || a["prometheus.io/port"] != strconv.Itoa(int(port)) || a["prometheus.io/path"] != "/metrics" {
			t.Errorf("%s: scrape annotations %v, want scrape true, port %d, path /metrics", name, a, port)
		}
		found := false
		if svc := serviceSelecting(r, pod.Labels, true); svc != nil {
			for _, p := range svc.Spec.Ports {
				found = found || p.Name == "metrics" && p.Port == port && p.TargetPort.String() == "metrics"
			}
		}
		if !found {
			t.Errorf("%s: the headless Service has no metrics port %d", name, port)
		}
	}
}

// checkPDB wants exactly one PDB selecting the pods, with maxUnavailable 1
// (a cell of three keeps its majority).
func checkPDB(t *testing.T, r rendered, what string, podLabels map[string]string) {
	var found int
	for _, p := range r.PDBs {
		if !selects(p.Spec.Selector.MatchLabels, podLabels) {
			continue
		}
		found++
		if p.Spec.MaxUnavailable == nil || p.Spec.MaxUnavailable.IntValue() != 1 || p.Spec.MinAvailable != nil {
			t.Errorf("%s: PDB %s maxUnavailable %v minAvailable %v, want maxUnavailable 1", what, p.Name, p.Spec.MaxUnavailable, p.Spec.MinAvailable)
		}
	}
	if found != 1 {
		t.Errorf("%s: %d PDBs select it, want 1", what, found)
	}
}

func checkContainers(t *testing.T, what string, spec corev1.PodSpec) {
	if len(spec.Containers) == 0 {
		t.Fatalf("%s: no containers", what)
	}
	for _, c := range spec.Containers {
		req, lim := c.Resources.Requests, c.Resources.Limits
		if req.Cpu().IsZero() || req.Memory().IsZero() || lim.Cpu().IsZero() || lim.Memory().IsZero() {
			t.Errorf("%s: container %s resources %+v, want cpu and memory requests and limits", what, c.Name, c.Resources)
		}
		if c.Image == "" || strings.HasSuffix(c.Image, ":") {
			t.Errorf("%s: container %s image %q", what, c.Name, c.Image)
		}
	}
}

func hasPort(c corev1.Container, name string) bool {
	for _, p := range c.Ports {
		if p.Name == name {
			return true
		}
	}
	return false
}

func selects(sel, podLabels map[string]string) bool {
	return len(sel) > 0 && labels.SelectorFromSet(sel).Matches(labels.Set(podLabels))
}

func serviceSelecting(r rendered, podLabels map[string]string, headless bool) *corev1.Service {
	for _, s := range r.Services {
		if selects(s.Spec.Selector, podLabels) && (s.Spec.ClusterIP == corev1.ClusterIPNone) == headless {
			return s
		}
	}
	return nil
}

// secretEnv are the variables that carry secrets: they must come from a
// Secret, never be written out as values.
var secretEnv = map[string]bool{"SLUICE_DATABASE_URL": true, "DATABASE_URL": true, "SLUICE_CELL_KEY": true, "SLUICE_STRIPE_KEY": true}

// checkSecrets: no secret in a ConfigMap, none as a plain env value.
func checkSecrets(t *testing.T, r rendered, file string) {
	var secrets []string // values the value set gives as secrets
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "s3cret-db-password") {
			secrets = append(secrets, "s3cret-db-password")
		}
	} else {
		secrets = append(secrets, "change-me")
	}
	for _, cm := range r.ConfigMaps {
		for k, v := range cm.Data {
			for _, s := range secrets {
				if strings.Contains(v, s) {
					t.Errorf("ConfigMap %s key %s holds a secret of the values", cm.Name, k)
				}
			}
			for _, w := range []string{"postgres://", "postgresql://", "secret", "password", "cell_key", "database_url", "BEGIN"} {
				if strings.Contains(strings.ToLower(v), strings.ToLower(w)) {
					t.Errorf("ConfigMap %s key %s mentions %q: secrets belong in Secrets", cm.Name, k, w)
				}
			}
		}
	}
	var specs []corev1.PodSpec
	for _, d := range r.Deployments {
		specs = append(specs, d.Spec.Template.Spec)
	}
	for _, s := range r.StatefulSets {
		specs = append(specs, s.Spec.Template.Spec)
	}
	for _, j := range r.Jobs {
		specs = append(specs, j.Spec.Template.Spec)
	}
	for _, spec := range specs {
		for _, c := range spec.Containers {
			for _, e := range c.Env {
				if secretEnv[e.Name] && (e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil) {
					t.Errorf("container %s: %s is not from a Secret", c.Name, e.Name)
				}
			}
		}
	}
}

// TestChartRefuses: values the chart cannot honour fail the render with
// what to change, instead of rendering something that does not work.
func TestChartRefuses(t *testing.T) {
	for _, tc := range []struct{ name, values, want string }{
		{"cell without key", "cells: [{id: x, peerCertSecret: p}]", "cellKeySecret is required"},
		{"cell without certificates", "cells: [{id: x, cellKeySecret: k}]", "peerCertSecret is required"},
		{"no database", "database: {url: \"\"}", "database.url or database.existingSecret is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "values.yaml")
			if err := os.WriteFile(f, []byte(tc.values+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := helmTemplate(t, f)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("helm template with %s: %v, want an error containing %q", tc.values, err, tc.want)
			}
		})
	}
}

package deploytest

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"

	"github.com/sluicehq/sluice/contract/testkit"
)

// repoRoot is the module's root directory.
func repoRoot(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil || len(bytes.TrimSpace(out)) == 0 {
		t.Fatalf("find the module root: %v", err)
	}
	return filepath.Dir(string(bytes.TrimSpace(out)))
}

// rendered is the chart's objects, decoded strictly into their types.
type rendered struct {
	Deployments  []*appsv1.Deployment
	StatefulSets []*appsv1.StatefulSet
	Services     []*corev1.Service
	ConfigMaps   []*corev1.ConfigMap
	Secrets      []*corev1.Secret
	Jobs         []*batchv1.Job
	PDBs         []*policyv1.PodDisruptionBudget
}

// helmTemplate renders the chart with the values files (none: the
// defaults) as release "sluice" in namespace "prod".
func helmTemplate(t testing.TB, valuesFiles ...string) (string, error) {
	t.Helper()
	args := []string{"template", "sluice", filepath.Join(repoRoot(t), "deploy", "helm", "sluice"), "--namespace", "prod"}
	for _, f := range valuesFiles {
		args = append(args, "-f", f)
	}
	cmd := exec.Command(testkit.CachedTool(t, "helm"), args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}

var docSep = regexp.MustCompile(`(?m)^---\s*$`)

// decode splits helm's output into documents and decodes each strictly
// (unknown or misspelt fields fail) into its k8s.io/api type; a kind the
// chart is not expected to render fails too.
func decode(t testing.TB, out string) rendered {
	t.Helper()
	var r rendered
	for i, doc := range docSep.Split(out, -1) {
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			t.Fatalf("document %d: %v\n%s", i, err, doc)
		}
		if head.Kind == "" {
			if strings.TrimSpace(stripComments(doc)) != "" {
				t.Fatalf("document %d has no kind:\n%s", i, doc)
			}
			continue
		}
		var obj any
		switch head.APIVersion + " " + head.Kind {
		case "apps/v1 Deployment":
			obj = appendNew(&r.Deployments)
		case "apps/v1 StatefulSet":
			obj = appendNew(&r.StatefulSets)
		case "v1 Service":
			obj = appendNew(&r.Services)
		case "v1 ConfigMap":
			obj = appendNew(&r.ConfigMaps)
		case "v1 Secret":
			obj = appendNew(&r.Secrets)
		case "batch/v1 Job":
			obj = appendNew(&r.Jobs)
		case "policy/v1 PodDisruptionBudget":
			obj = appendNew(&r.PDBs)
		default:
			t.Fatalf("document %d: unexpected %s %s", i, head.APIVersion, head.Kind)
		}
		if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
			t.Fatalf("document %d (%s) does not decode strictly into its type: %v\n%s", i, head.Kind, err, doc)
		}
	}
	return r
}

func appendNew[T any](s *[]*T) *T {
	v := new(T)
	*s = append(*s, v)
	return v
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// render renders and decodes the chart, failing the test on any error.
func render(t testing.TB, valuesFiles ...string) rendered {
	t.Helper()
	out, err := helmTemplate(t, valuesFiles...)
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, out)
}
